import { CHANNELS, isTimeZone } from "@notify/core";
import { seedApiKey } from "@notify/db";
import fc from "fast-check";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// GET and PUT /api/v1/users/{id}/preferences through app.request(), on a real database.
const { app, database } = await ingestApp(t, { maxBodyBytes: 16_384 });
const key = await seedApiKey(database, { clientId: "shop", name: "prefs", scopes: ["preferences"] });
const adminKey = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["admin"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });

const point = Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 7)]).toString("base64url");
const secret = Buffer.alloc(16, 9).toString("base64url");
const subscription = (n: number) => ({
  endpoint: `https://fcm.googleapis.com/fcm/send/device-${n}`,
  expirationTime: null,
  keys: { p256dh: point, auth: secret },
});
const defaults = (userId: string) => ({
  user_id: userId,
  channel_optout: [],
  category_optout: [],
  quiet_hours: null,
  rate_cap_per_day: null,
  device_tokens: [],
  locale: null,
  time_zone: null,
});

const get = (userId: string, apiKey = key) =>
  app.request(`/api/v1/users/${encodeURIComponent(userId)}/preferences`, { headers: { "x-api-key": apiKey } });
const put = (userId: string, body: unknown, apiKey = key) =>
  app.request(`/api/v1/users/${encodeURIComponent(userId)}/preferences`, {
    method: "PUT",
    headers: { "x-api-key": apiKey, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as { code: string; errors?: Array<{ field: string; message: string }> };
  t.equal(body.code, code);
  return body;
}

t.test("a user without a record gets the defaults", async (t) => {
  const response = await get("nobody");
  t.equal(response.status, 200);
  t.same(await response.json(), defaults("nobody"));
  t.equal(response.headers.get("last-modified"), null, "nothing stored, nothing modified");
});

t.test("PUT replaces the document and returns it, normalised; GET reads the same", async (t) => {
  const response = await put("user-1", {
    channel_optout: ["sms", "push", "sms"],
    category_optout: ["marketing", "digest", "marketing"],
    quiet_hours: { start: "22:00", end: "07:00", tz: "Europe/London" },
    rate_cap_per_day: 3,
    device_tokens: [subscription(1), { ...subscription(2), expirationTime: 1893456000000 }],
    locale: "en-gb",
    time_zone: "America/Sao_Paulo",
  });
  t.equal(response.status, 200);
  t.ok(response.headers.get("last-modified")?.endsWith("GMT"));
  const stored = {
    user_id: "user-1",
    channel_optout: ["push", "sms"],
    category_optout: ["digest", "marketing"],
    quiet_hours: { start: "22:00", end: "07:00", tz: "Europe/London" },
    rate_cap_per_day: 3,
    device_tokens: [subscription(1), { ...subscription(2), expirationTime: 1893456000000 }],
    locale: "en-GB",
    time_zone: "America/Sao_Paulo",
  };
  t.same(await response.json(), stored);
  const read = await get("user-1");
  t.same(await read.json(), stored);

  const roundTrip = await put("user-1", stored);
  t.same(await roundTrip.json(), stored, "a GET answer can be sent back as is");

  const cleared = await put("user-1", {});
  t.same(await cleared.json(), defaults("user-1"), "PUT replaces: absent fields take their defaults");
  t.same(await (await get("user-1")).json(), defaults("user-1"));
  t.ok((await get("user-1")).headers.get("last-modified"), "but the record exists now");
});

t.test("any printable user id works in the path, percent-encoded", async (t) => {
  for (const userId of ["a/b", "mail:ada@example.com", "x%y?z#1"]) {
    const stored = await put(userId, { locale: "de" });
    t.equal(stored.status, 200, userId);
    t.match(await stored.json(), { user_id: userId, locale: "de" });
    t.match(await (await get(userId)).json(), { user_id: userId, locale: "de" });
  }
});

t.test("quiet hours may cross midnight, or not; a cap of zero blocks every promotional send", async (t) => {
  for (const quiet of [
    { start: "23:30", end: "06:15", tz: "America/New_York" },
    { start: "09:00", end: "17:00", tz: "Asia/Kolkata" },
    { start: "00:00", end: "23:59", tz: "Australia/Lord_Howe" },
  ]) {
    const response = await put("user-2", { quiet_hours: quiet, rate_cap_per_day: 0 });
    t.equal(response.status, 200, `${quiet.start}-${quiet.end} ${quiet.tz}`);
    t.match(await response.json(), { quiet_hours: quiet, rate_cap_per_day: 0 });
  }
});

t.test("invalid documents are refused with every problem named, and nothing is stored", async (t) => {
  const body = await expectProblem(
    t,
    await put("user-3", {
      channel_optout: ["fax"],
      category_optout: ["Not A Category"],
      quiet_hours: { start: "7:00", end: "24:00", tz: "Mars/Olympus" },
      rate_cap_per_day: -1,
      device_tokens: [{ endpoint: "http://push.example.com/x", keys: { p256dh: "short", auth: secret } }],
      locale: "english_US",
      time_zone: "Mars/Olympus",
      colour: "blue",
    }),
    400,
    "validation_failed",
  );
  const fields = (body.errors ?? []).map((e) => e.field).sort();
  t.same(fields, [
    "category_optout.0",
    "channel_optout.0",
    "colour",
    "device_tokens.0.endpoint",
    "device_tokens.0.keys",
    "locale",
    "quiet_hours.end",
    "quiet_hours.start",
    "quiet_hours.tz",
    "rate_cap_per_day",
    "time_zone",
  ]);
  t.same(await (await get("user-3")).json(), defaults("user-3"), "nothing stored");

  const cases: Array<[string, unknown, string]> = [
    ["start equals end", { quiet_hours: { start: "22:00", end: "22:00", tz: "UTC" } }, "quiet_hours.end"],
    ["an offset is no IANA zone", { quiet_hours: { start: "22:00", end: "07:00", tz: "+05:00" } }, "quiet_hours.tz"],
    ["a fractional cap", { rate_cap_per_day: 1.5 }, "rate_cap_per_day"],
    ["a cap as a string", { rate_cap_per_day: "3" }, "rate_cap_per_day"],
    ["an offset as time_zone", { time_zone: "+05:00" }, "time_zone"],
    ["an empty time_zone", { time_zone: "" }, "time_zone"],
    ["a time_zone as a number", { time_zone: 1 }, "time_zone"],
    ["a repeated endpoint", { device_tokens: [subscription(1), subscription(1)] }, "device_tokens.1"],
    [
      "credentials in the endpoint",
      { device_tokens: [{ ...subscription(1), endpoint: "https://u:p@push.example.com/x" }] },
      "device_tokens.0.endpoint",
    ],
    ["an unknown subscription field", { device_tokens: [{ ...subscription(1), extra: 1 }] }, "device_tokens.0.extra"],
    [
      "too many subscriptions",
      { device_tokens: Array.from({ length: 21 }, (_, i) => subscription(i)) },
      "device_tokens",
    ],
    ["a null list", { channel_optout: null }, "channel_optout"],
    ["another user's id", { user_id: "someone-else" }, "user_id"],
  ];
  for (const [what, input, field] of cases) {
    const problem = await expectProblem(t, await put("user-3", input), 400, "validation_failed");
    t.ok(
      problem.errors?.some((e) => e.field === field),
      `${what}: names ${field} (got ${JSON.stringify(problem.errors)})`,
    );
  }
  await expectProblem(t, await put("user-3", "{not json"), 400, "malformed_json");
  await expectProblem(
    t,
    await app.request("/api/v1/users/user-3/preferences", {
      method: "PUT",
      headers: { "x-api-key": key, "content-type": "text/plain" },
      body: "{}",
    }),
    415,
    "unsupported_media_type",
  );
  await expectProblem(t, await put("user-3", { locale: "x".repeat(20_000) }), 413, "payload_too_large");
  await expectProblem(t, await get("has space"), 400, "validation_failed");
});

t.test("time_zone: a valid zone is stored and read back, an invalid one changes nothing, null clears it", async (t) => {
  const zoned = { ...defaults("user-tz"), locale: "en-AU", time_zone: "Australia/Lord_Howe" };
  const stored = await put("user-tz", { locale: "en-AU", time_zone: "Australia/Lord_Howe" });
  t.equal(stored.status, 200);
  t.same(await stored.json(), zoned);
  const before = await get("user-tz");
  const lastModified = before.headers.get("last-modified");
  t.same(await before.json(), zoned, "read back");

  for (const bad of ["Mars/Olympus", "+05:00", "UTC+1", "Europe/London ", "x".repeat(65)]) {
    const problem = await expectProblem(
      t,
      await put("user-tz", { locale: "fr", time_zone: bad }),
      400,
      "validation_failed",
    );
    t.match(problem.errors, [{ field: "time_zone", message: /IANA time zone/ }], JSON.stringify(bad));
  }
  const after = await get("user-tz");
  t.same(await after.json(), zoned, "the stored document is unchanged");
  t.equal(after.headers.get("last-modified"), lastModified, "and was not written");

  const cleared = await put("user-tz", { locale: "en-AU", time_zone: null });
  t.equal(cleared.status, 200);
  t.same(await cleared.json(), { ...zoned, time_zone: null }, "null clears it");
  t.same(await (await get("user-tz")).json(), { ...zoned, time_zone: null });

  await put("user-tz", { time_zone: "Asia/Kathmandu" });
  t.same(await (await put("user-tz", {})).json(), defaults("user-tz"), "absent from a PUT: the default, null");
});

t.test("the OpenAPI contract documents time_zone in the PUT body and both answers", async (t) => {
  const doc = (await (await app.request("/api/v1/openapi.json")).json()) as {
    paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>;
  };
  const path = doc.paths["/api/v1/users/{id}/preferences"];
  type Schema = { properties?: Record<string, unknown> };
  const schemaOf = (part: unknown) =>
    (part as { content: Record<string, { schema: Schema }> }).content["application/json"]?.schema;
  for (const [where, part] of [
    ["PUT body", path?.put?.requestBody],
    ["PUT answer", path?.put?.responses["200"]],
    ["GET answer", path?.get?.responses["200"]],
  ] as const) {
    t.ok(schemaOf(part)?.properties?.time_zone, `${where} has time_zone`);
  }
});

t.test("property: a time_zone is stored exactly when it is an IANA zone; otherwise nothing changes", async (t) => {
  const keep = { locale: "de", time_zone: "Europe/Vienna" };
  t.equal((await put("prop-tz", keep)).status, 200);
  const candidate = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom(...Intl.supportedValuesOf("timeZone")),
    fc.constantFrom("utc", "europe/paris", "Etc/GMT-14", "US/Pacific", "GMT", "Europe/Paris/", "../etc/passwd"),
  );
  await fc.assert(
    fc.asyncProperty(candidate, async (zone) => {
      const response = await put("prop-tz", { locale: "de", time_zone: zone });
      const body = (await response.json()) as { time_zone?: string; errors?: Array<{ field: string }> };
      if (isTimeZone(zone)) {
        const ok = response.status === 200 && body.time_zone === zone;
        await put("prop-tz", keep);
        return ok;
      }
      const read = (await (await get("prop-tz")).json()) as { time_zone: string };
      return (
        response.status === 400 &&
        body.errors?.some((e) => e.field === "time_zone") === true &&
        read.time_zone === keep.time_zone
      );
    }),
    { numRuns: 150 },
  );
  t.pass("held");
});

t.test("security: a key is required, with the preferences scope (admin includes it)", async (t) => {
  await expectProblem(t, await app.request("/api/v1/users/u/preferences"), 401, "unauthenticated");
  await expectProblem(t, await get("u", "ntf_unknown"), 401, "invalid_api_key");
  await expectProblem(t, await get("u", ingestKey), 403, "insufficient_scope");
  await expectProblem(t, await put("u", {}, ingestKey), 403, "insufficient_scope");
  t.same(await (await get("u", adminKey)).json(), defaults("u"));
  await expectProblem(t, await app.request(`/api/v1/users/u/preferences?api_key=${key}`), 400, "invalid_request");
});

t.test("property: any valid document is stored and read back as normalised", async (t) => {
  const clock = fc
    .tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }))
    .map(([h, m]) => `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}`);
  const doc = fc.record({
    channel_optout: fc.array(fc.constantFrom(...CHANNELS), { maxLength: 6 }),
    category_optout: fc.array(fc.stringMatching(/^[a-z0-9][a-z0-9_.-]{0,10}$/), { maxLength: 5 }),
    quiet_hours: fc.option(
      fc
        .record({ start: clock, end: clock, tz: fc.constantFrom("UTC", "Europe/Paris", "Pacific/Chatham") })
        .filter((q) => q.start !== q.end),
      { nil: null },
    ),
    rate_cap_per_day: fc.option(fc.nat(1000), { nil: null }),
    locale: fc.option(fc.constantFrom("en", "EN-us", "fr-ca", "zh-hant-tw", "de"), { nil: null }),
    time_zone: fc.option(fc.constantFrom("UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"), {
      nil: null,
    }),
  });
  let n = 0;
  await fc.assert(
    fc.asyncProperty(doc, async (input) => {
      const userId = `prop-${n++}`;
      const response = await put(userId, input);
      if (response.status !== 200) return false;
      const read = (await (await get(userId)).json()) as Record<string, unknown>;
      const channels = CHANNELS.filter((c) => input.channel_optout.includes(c));
      return (
        JSON.stringify(read.channel_optout) === JSON.stringify(channels) &&
        JSON.stringify(read.category_optout) === JSON.stringify([...new Set(input.category_optout)].sort()) &&
        JSON.stringify(read.quiet_hours) === JSON.stringify(input.quiet_hours) &&
        read.rate_cap_per_day === input.rate_cap_per_day &&
        read.locale === (input.locale === null ? null : Intl.getCanonicalLocales(input.locale)[0]) &&
        read.time_zone === input.time_zone
      );
    }),
    { numRuns: 60 },
  );
  t.pass("held");
});

t.test("push endpoints must be on public hosts; the development profile allows the local sandbox", async (t) => {
  const internal = [
    "https://127.0.0.1:8443/push/a",
    "https://[::1]/push/a",
    "https://10.1.2.3/push/a",
    "https://169.254.169.254/latest/meta-data",
    "https://192.168.1.10/push/a",
    "https://[fd12:3456::1]/push/a",
    "https://localhost/push/a",
    "https://push.internal/push/a",
  ];
  for (const endpoint of internal) {
    const problem = await expectProblem(
      t,
      await put("user-9", { device_tokens: [{ ...subscription(1), endpoint }] }),
      400,
      "validation_failed",
    );
    t.match(problem.errors, [{ field: "device_tokens.0.endpoint", message: /public host/ }], endpoint);
  }
  t.same(await (await get("user-9")).json(), defaults("user-9"), "nothing stored");

  const { app: development } = await ingestApp(t, { database, allowPrivatePushEndpoints: true });
  const sandbox = { ...subscription(1), endpoint: "https://127.0.0.1:8443/push/a" };
  const stored = await development.request("/api/v1/users/user-9/preferences", {
    method: "PUT",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ device_tokens: [sandbox] }),
  });
  t.equal(stored.status, 200, "the development profile takes the push sandbox's endpoint");
  t.match(await stored.json(), { device_tokens: [{ endpoint: sandbox.endpoint }] });
});
