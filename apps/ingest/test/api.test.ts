import { randomUUID } from "node:crypto";
import { seedApiKey, seedTemplate } from "@notify/db";
import { createMetrics } from "@notify/http";
import { settled, streamCount } from "@notify/testing";
import fc from "fast-check";
import t, { type Test } from "tap";
import { createAdminApp } from "../src/app.js";
import { ingestApp } from "./support.js";

// The public API through app.request(), on a real Postgres database and a real NATS namespace.
const { app, admin, deps, database, bus, lines } = await ingestApp(t, { maxBodyBytes: 4096 });
await seedTemplate(database, {
  id: "welcome",
  params: ["name", "order.id"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "shop ingest", scopes: ["ingest", "read"] });
const readOnlyKey = await seedApiKey(database, { clientId: "shop", name: "shop reader", scopes: ["read"] });
const otherKey = await seedApiKey(database, { clientId: "blog", name: "blog", scopes: ["ingest", "read"] });
const revokedKey = await seedApiKey(database, { clientId: "shop", name: "old", scopes: ["ingest"] });
await database.sql`update api_keys set revoked_at = now() where name = 'old'`;

const valid = {
  user_id: "u1",
  category: "orders",
  template_id: "welcome",
  data: { name: "Ada", order: { id: 7 } },
  priority: "transactional",
};
const post = (body: unknown, headers: Record<string, string> = {}) =>
  app.request("/api/v1/notifications", {
    method: "POST",
    headers: {
      "x-api-key": ingestKey,
      "content-type": "application/json",
      "idempotency-key": randomUUID(),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
const laneMessages = () => streamCount(bus, bus.streams.lane("transactional"));
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as Record<string, unknown>;
  t.match(body, { status, code, type: `https://notify.dev/problems/${code}`, title: String });
  return body;
}

t.test("POST answers 202 after storing and publishing, Location points at the notification", async (t) => {
  const before = await laneMessages();
  const response = await post(valid);
  t.equal(response.status, 202);
  const body = (await response.json()) as { notification_id: string; status: string };
  t.equal(body.status, "accepted");
  t.equal(response.headers.get("location"), `/api/v1/notifications/${body.notification_id}`);
  t.equal(await laneMessages(), before + 1, "one lane message");
  const [row] = await database.sql`select user_id from notifications where id = ${body.notification_id}`;
  t.equal(row?.user_id, "u1");
  await settled(database, body.notification_id);
});

t.test("authentication and scopes", async (t) => {
  const none = await app.request("/api/v1/notifications/x");
  await expectProblem(t, none, 401, "unauthenticated");
  t.equal(
    none.headers.get("www-authenticate"),
    'Bearer realm="notify"',
    "no error code without credentials (RFC 6750)",
  );

  const unknown = await app.request("/api/v1/notifications/x", { headers: { authorization: "Bearer ntf_nope" } });
  await expectProblem(t, unknown, 401, "invalid_api_key");
  t.match(unknown.headers.get("www-authenticate"), /error="invalid_token"/);

  await expectProblem(t, await post(valid, { "x-api-key": revokedKey }), 401, "invalid_api_key");

  const scope = await post(valid, { "x-api-key": readOnlyKey });
  await expectProblem(t, scope, 403, "insufficient_scope");
  t.match(scope.headers.get("www-authenticate"), /error="insufficient_scope"/);

  const both = await app.request("/api/v1/notifications/x", {
    headers: { authorization: `Bearer ${ingestKey}`, "x-api-key": ingestKey },
  });
  await expectProblem(t, both, 400, "invalid_request");

  const inQuery = await app.request(`/api/v1/notifications/x?api_key=${ingestKey}`);
  await expectProblem(t, inQuery, 400, "invalid_request");
  t.notOk(
    lines().some((line) => line.includes(ingestKey)),
    "a key never reaches the log",
  );

  const bearer = await app.request("/api/v1/notifications/x", { headers: { authorization: `Bearer ${ingestKey}` } });
  await expectProblem(t, bearer, 404, "not_found");
});

t.test("one client never reads another client's notification; not routed yet, it reads accepted", async (t) => {
  const created = (await (await post(valid)).json()) as { notification_id: string };
  const own = await app.request(`/api/v1/notifications/${created.notification_id}`, {
    headers: { "x-api-key": ingestKey },
  });
  t.equal(own.status, 200);
  t.match(await own.json(), {
    notification_id: created.notification_id,
    user_id: "u1",
    category: "orders",
    status: "accepted",
    channels: {},
  });
  const foreign = await app.request(`/api/v1/notifications/${created.notification_id}`, {
    headers: { "x-api-key": otherKey },
  });
  await expectProblem(t, foreign, 404, "not_found");
});

t.test("idempotency: replay, reuse with another body, per-client scope", async (t) => {
  const key = randomUUID();
  const first = await post(valid, { "idempotency-key": key });
  const { notification_id } = (await first.json()) as { notification_id: string };
  const before = await laneMessages();
  const replay = await post(valid, { "idempotency-key": `"${key}"` });
  t.equal(replay.status, 200);
  t.equal(replay.headers.get("idempotent-replayed"), "true");
  t.same(await replay.json(), { notification_id, status: "accepted" });
  t.equal(await laneMessages(), before, "a replay enqueues nothing");

  await expectProblem(
    t,
    await post({ ...valid, user_id: "u2" }, { "idempotency-key": key }),
    422,
    "idempotency_key_reused",
  );

  const other = await post(valid, { "idempotency-key": key, "x-api-key": otherKey });
  t.equal(other.status, 202, "keys are scoped per client");
});

t.test("bad input: a clear 4xx problem and nothing left behind", async (t) => {
  const before = { rows: await rows(), lane: await laneMessages() };
  const cases: Array<[string, () => Response | Promise<Response>, number, string]> = [
    [
      "missing Idempotency-Key",
      () =>
        app.request("/api/v1/notifications", {
          method: "POST",
          headers: { "x-api-key": ingestKey, "content-type": "application/json" },
          body: JSON.stringify(valid),
        }),
      400,
      "idempotency_key_missing",
    ],
    [
      "malformed Idempotency-Key",
      () => post(valid, { "idempotency-key": '"unterminated' }),
      400,
      "idempotency_key_invalid",
    ],
    ["wrong content type", () => post(valid, { "content-type": "text/plain" }), 415, "unsupported_media_type"],
    ["malformed JSON", () => post("{nope"), 400, "malformed_json"],
    [
      "body over the limit",
      () => post({ ...valid, data: { name: "x".repeat(5000), order: { id: 1 } } }),
      413,
      "payload_too_large",
    ],
    ["unknown template", () => post({ ...valid, template_id: "nope" }), 400, "unknown_template"],
    [
      "data missing a declared parameter",
      () => post({ ...valid, data: { name: "Ada" } }),
      400,
      "template_data_invalid",
    ],
    ["bad priority", () => post({ ...valid, priority: "urgent" }), 400, "validation_failed"],
    ["unknown channel", () => post({ ...valid, channels: ["fax"] }), 400, "validation_failed"],
    ["unknown field", () => post({ ...valid, extra: 1 }), 400, "validation_failed"],
    ["body not an object", () => post("[1,2]"), 400, "validation_failed"],
    [
      "U+0000 in data (Postgres cannot store it)",
      () => post({ ...valid, data: { name: "a\u0000b", order: { id: 1 } } }),
      400,
      "validation_failed",
    ],
    [
      "an unpaired surrogate in a data key",
      () => post({ ...valid, data: { name: "x", order: { id: 1, "\ud800": 1 } } }),
      400,
      "validation_failed",
    ],
  ];
  for (const [name, send, status, code] of cases) {
    await t.test(name, async (t) => {
      await expectProblem(t, await send(), status, code);
    });
  }
  const fields = (await (await post({ ...valid, data: {} })).json()) as { errors: Array<{ field: string }> };
  t.same(
    fields.errors.map((e) => e.field),
    ["data.name", "data.order.id"],
    "names every missing parameter",
  );
  t.same({ rows: await rows(), lane: await laneMessages() }, before, "nothing stored or enqueued");
});

t.test("one request Postgres cannot store does not fail the others of its batch", async (t) => {
  const bad = post({ ...valid, data: { name: "\u0000", order: { id: 1 } } });
  const goods = Array.from({ length: 5 }, () => post(valid));
  const [refused, ...accepted] = await Promise.all([bad, ...goods]);
  const problem = await expectProblem(t, refused as Response, 400, "validation_failed");
  t.same(problem.errors, [
    {
      field: "data.name",
      message: "must not contain U+0000 or an unpaired UTF-16 surrogate (Postgres cannot store them)",
    },
  ]);
  t.same(
    accepted.map((r) => r.status),
    [202, 202, 202, 202, 202],
  );
});

t.test("property: random bodies and headers never get a 5xx, and a 4xx leaves nothing behind", async (t) => {
  // Any code point, U+0000 and unpaired surrogates included.
  const hostileString = fc.string({
    unit: fc.oneof(
      fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
      fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)),
    ),
  });
  const anyJson = fc.oneof(
    fc.json(),
    fc
      .record(
        {
          user_id: fc.oneof(fc.string(), fc.constant("u1"), fc.integer()),
          category: fc.oneof(fc.string(), fc.constant("orders")),
          template_id: fc.oneof(fc.string(), fc.constant("welcome")),
          data: fc.oneof(
            fc.object(),
            fc.constant({ name: "x", order: { id: 1 } }),
            fc.dictionary(hostileString, hostileString).map((extra) => ({
              name: "x",
              order: { id: 1 },
              ...extra,
            })),
          ),
          priority: fc.oneof(fc.string(), fc.constantFrom("transactional", "promotional")),
          channels: fc.option(fc.array(fc.oneof(fc.string(), fc.constantFrom("email", "sms", "push", "in_app")))),
        },
        { requiredKeys: [] },
      )
      .map((v) => JSON.stringify(v)),
  );
  const printable = (max: number) => fc.stringMatching(new RegExp(`^[\\x20-\\x7e]{0,${max}}$`));
  const headerSets = fc.record(
    {
      "content-type": fc.oneof(
        fc.constantFrom(
          "application/json",
          "application/json; charset=utf-8",
          "text/plain",
          "application/merge-patch+json",
        ),
        printable(40),
      ),
      "idempotency-key": fc.oneof(
        fc.uuid(),
        printable(300),
        fc.uuid().map((u) => `"${u}"`),
      ),
      "x-api-key": fc.oneof(fc.constant(ingestKey), fc.constant(readOnlyKey), printable(60)),
      authorization: fc.oneof(fc.constant(`Bearer ${ingestKey}`), printable(80)),
      accept: printable(40),
    },
    { requiredKeys: [] },
  );
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(anyJson, headerSets, async (body, headers) => {
      runs++;
      const before = { rows: await rows(), lane: await laneMessages() };
      const response = await app.request("/api/v1/notifications", { method: "POST", headers, body });
      if (response.status >= 500) return false;
      if (response.status >= 400) {
        const problem = (await response.json()) as { status: number; code: string };
        const after = { rows: await rows(), lane: await laneMessages() };
        return (
          response.headers.get("content-type") === "application/problem+json" &&
          problem.status === response.status &&
          typeof problem.code === "string" &&
          after.rows === before.rows &&
          after.lane === before.lane
        );
      }
      return response.status === 200 || response.status === 202;
    }),
    { numRuns: 2000 },
  );
  t.equal(runs, 2000, "held for 2000 random requests");
});

t.test("property: any path parameter or query value on the read routes never gets a 5xx", async (t) => {
  const adminKey = await seedApiKey(database, { clientId: "shop", name: "shop admin", scopes: ["admin"] });
  const routes = [
    "/api/v1/notifications/{}",
    "/api/v1/broadcasts/{}",
    "/api/v1/audiences/{}",
    "/api/v1/templates/{}",
    "/api/v1/users/{}/preferences",
    "/api/v1/users/{}/contacts",
    "/api/v1/users/{}/notifications",
  ];
  // Any code point percent-encoded byte by byte (a lone surrogate as UTF-8 would never be), or
  // raw percent sequences, %00 and malformed ones included.
  const encoded = fc
    .string({ unit: "binary", minLength: 1 })
    .map((text) => [...Buffer.from(text, "utf8")].map((byte) => `%${byte.toString(16).padStart(2, "0")}`).join(""));
  const raw = fc.array(fc.constantFrom("%00", "%ED%A0%80", "%zz", "%", "a", "%2F", "..", "%FF"), { minLength: 1 });
  const segment = fc.oneof(
    encoded,
    raw.map((parts) => parts.join("")),
  );
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...routes), segment, fc.option(segment), async (route, value, query) => {
      runs++;
      const path = route.replace("{}", value) + (query === null ? "" : `?cursor=${query}&category=${query}`);
      const response = await app.request(path, { headers: { "x-api-key": adminKey } });
      if (response.status >= 500) return false;
      if (response.status >= 400) {
        return response.headers.get("content-type") === "application/problem+json";
      }
      return true;
    }),
    { numRuns: 1000 },
  );
  t.equal(runs, 1000, "held for 1000 random paths");
  const refused = await app.request("/api/v1/notifications/a%00b", { headers: { "x-api-key": adminKey } });
  await expectProblem(t, refused, 400, "validation_failed");
});

t.test("liveness on the public port; readiness and metrics only on the operator's port", async (t) => {
  t.equal((await app.request("/healthz")).status, 200);
  t.equal((await app.request("/readyz")).status, 404, "no readiness details where the API is");
  t.equal((await app.request("/metrics")).status, 404, "no metrics where the API is");
  const ready = await admin.request("/readyz");
  t.equal(ready.status, 200);
  t.match(await ready.json(), { status: "ready", checks: { postgres: true, nats: true } });
  t.equal((await admin.request("/healthz")).status, 200);
  const withMetrics = createAdminApp({ ...deps, metrics: createMetrics("ingest") });
  const scrape = await withMetrics.request("/metrics");
  t.equal(scrape.status, 200);
  t.match(await scrape.text(), /notify_app_info\{app="ingest"\} 1/);
});
