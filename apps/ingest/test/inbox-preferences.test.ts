import { seedApiKey, storeInboxItem } from "@notify/db";
import { seedNotification } from "@notify/testing";
import t from "tap";
import { ingestApp } from "./support.js";

// The preference centre an inbox token opens: the user reads and changes what a user may change
// of their own preferences (nothing the server-side API alone sets), with the server-side API's
// validators, through the same document routing reads; a critical category is shown locked and
// cannot be opted out of; a token opens its own user's centre only.

const CRITICAL = ["otp", "security"];
const { app, database } = await ingestApp(t, { criticalCategories: CRITICAL });
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
const bankKey = await seedApiKey(database, { clientId: "bank", name: "bank inbox", scopes: ["inbox"] });
const prefsKey = await seedApiKey(database, { clientId: "shop", name: "prefs", scopes: ["preferences"] });

type App = Awaited<ReturnType<typeof ingestApp>>["app"];

async function mint(userId: string, key = inboxKey, on: App = app) {
  const res = await on.request(`/api/v1/users/${userId}/inbox-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
  });
  if (res.status !== 201) throw new Error(`mint: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

const asUser = (token: string, path: string, init: RequestInit = {}, on: App = app) =>
  on.request(`/api/v1${path}`, {
    ...init,
    headers: { "x-inbox-token": token, ...(init.headers as Record<string, string>) },
  });
const patch = (token: string, body: unknown, contentType = "application/json") =>
  asUser(token, "/inbox/preferences", {
    method: "PATCH",
    headers: { "content-type": contentType },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

interface Category {
  category: string;
  opted_out: boolean;
  locked: boolean;
}
interface Centre {
  channel_optout: string[];
  category_optout: string[];
  quiet_hours: { start: string; end: string; tz: string } | null;
  time_zone: string | null;
  locale: string | null;
  categories: Category[];
}
const centre = async (token: string) => {
  const res = await asUser(token, "/inbox/preferences");
  if (res.status !== 200) throw new Error(`GET: ${res.status} ${await res.text()}`);
  return (await res.json()) as Centre;
};

/** The document as the server-side API (and routing) reads it. */
const serverSide = async (userId: string) => {
  const res = await app.request(`/api/v1/users/${userId}/preferences`, {
    headers: { authorization: `Bearer ${prefsKey}` },
  });
  return (await res.json()) as Record<string, unknown>;
};
const storedRow = async (userId: string) =>
  (await database.sql`select * from user_preferences where user_id = ${userId}`)[0] ?? null;

let sent = 0;
/** A notification of `client` to the user in `category`, delivered in-app. */
async function deliver(userId: string, category: string, client = "shop") {
  const id = `n-${client}-${userId}-${sent++}`;
  await seedNotification(database, { id, clientId: client, userId, category });
  await storeInboxItem(database.sql, { userId, notificationId: id, category, title: null, body: "b" });
}

t.test("a user without a document sees the defaults, the client's categories and the locked ones", async (t) => {
  await deliver("ada", "orders");
  await deliver("ada", "news");
  await deliver("ada", "statements", "bank");
  const token = await mint("ada");
  const res = await asUser(token, "/inbox/preferences");
  t.equal(res.status, 200);
  t.equal(res.headers.get("last-modified"), null, "nothing was ever written");
  t.same(await res.json(), {
    channel_optout: [],
    category_optout: [],
    quiet_hours: null,
    time_zone: null,
    locale: null,
    categories: [
      { category: "news", opted_out: false, locked: false },
      { category: "orders", opted_out: false, locked: false },
      { category: "otp", opted_out: false, locked: true },
      { category: "security", opted_out: false, locked: true },
    ],
  });
  t.notOk(
    (await centre(await mint("ada", bankKey))).categories.some((c) => c.category === "orders"),
    "another client's token is not shown the shop's categories",
  );
});

t.test("PATCH changes the fields sent and nothing else", async (t) => {
  const put = await app.request("/api/v1/users/bo/preferences", {
    method: "PUT",
    headers: { authorization: `Bearer ${prefsKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      rate_cap_per_day: 3,
      device_tokens: [
        {
          endpoint: "https://fcm.googleapis.com/fcm/send/abc",
          keys: {
            p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
            auth: "tBHItJI5svbpez7KI4CCXg",
          },
        },
      ],
      locale: "fr",
    }),
  });
  t.equal(put.status, 200);
  const token = await mint("bo");
  const read = await centre(token);
  t.notOk("rate_cap_per_day" in read || "device_tokens" in read || "user_id" in read, "what the API sets is not shown");

  const changed = await patch(token, { channel_optout: ["sms", "email", "sms"], time_zone: "Europe/Paris" });
  t.equal(changed.status, 200);
  t.ok(changed.headers.get("last-modified"));
  t.match(await changed.json(), { channel_optout: ["email", "sms"], time_zone: "Europe/Paris", locale: "fr" });
  const quiet = { start: "22:00", end: "07:00", tz: "Europe/Paris" };
  const merged = await patch(token, { quiet_hours: quiet, locale: "en-gb" }, "application/merge-patch+json");
  t.equal(merged.status, 200, "application/merge-patch+json is taken too");
  t.match(await merged.json(), { channel_optout: ["email", "sms"], quiet_hours: quiet, locale: "en-GB" });
  t.match(
    await serverSide("bo"),
    {
      channel_optout: ["email", "sms"],
      quiet_hours: quiet,
      time_zone: "Europe/Paris",
      locale: "en-GB",
      rate_cap_per_day: 3,
      device_tokens: [{ endpoint: "https://fcm.googleapis.com/fcm/send/abc" }],
    },
    "the server-side document has the user's changes, and kept the cap and the device tokens",
  );
  t.match(await (await patch(token, { quiet_hours: null, time_zone: null })).json(), {
    quiet_hours: null,
    time_zone: null,
    locale: "en-GB",
  });
  const before = await storedRow("bo");
  const empty = await patch(token, {});
  t.equal(empty.status, 200, "an empty patch changes nothing");
  t.same(await storedRow("bo"), before, "and writes nothing");
});

t.test("category opt-outs: shown, replaced, and a critical one locked", async (t) => {
  await deliver("cy", "orders");
  const token = await mint("cy");
  const res = await patch(token, { category_optout: ["news", "orders", "news"] });
  t.equal(res.status, 200);
  const body = (await res.json()) as Centre;
  t.same(body.category_optout, ["news", "orders"]);
  t.same(
    body.categories.filter((c) => c.opted_out).map((c) => c.category),
    ["news", "orders"],
    "a category the user refuses is listed, whoever sent it",
  );

  const refused = await patch(token, { category_optout: ["orders", "security"], locale: "de" });
  t.equal(refused.status, 400);
  t.equal(refused.headers.get("content-type"), "application/problem+json");
  const problem = (await refused.json()) as { code: string; detail: string; errors: Array<{ field: string }> };
  t.equal(problem.code, "validation_failed");
  t.match(problem.detail, /"security" is a critical category/, "the refusal names the category");
  t.match(problem.errors, [{ field: "category_optout", message: /security/ }]);
  t.equal(problem.errors.length, 1);
  t.same((await serverSide("cy")).category_optout, ["news", "orders"], "nothing was written");
  t.equal((await serverSide("cy")).locale, null, "not even the other fields sent");

  // An opt-out of a critical category the server-side API stored: routing ignores it; the user
  // is shown the category locked and not refused, and changing their opt-outs keeps it.
  await app.request("/api/v1/users/cy/preferences", {
    method: "PUT",
    headers: { authorization: `Bearer ${prefsKey}`, "content-type": "application/json" },
    body: JSON.stringify({ category_optout: ["news", "otp"] }),
  });
  const shown = await centre(token);
  t.same(shown.category_optout, ["news"]);
  t.same(
    shown.categories.find((c) => c.category === "otp"),
    { category: "otp", opted_out: false, locked: true },
  );
  t.equal((await patch(token, { category_optout: [...shown.category_optout, "promo"] })).status, 200);
  t.same((await serverSide("cy")).category_optout, ["news", "otp", "promo"], "the API's opt-out is kept");
  t.equal((await patch(token, { category_optout: [] })).status, 200);
  t.same((await serverSide("cy")).category_optout, ["otp"]);
});

t.test("invalid input is a 400 problem naming the field, and nothing is written", async (t) => {
  const token = await mint("dee");
  const cases: Array<[unknown, string]> = [
    [{ time_zone: "Mars/Olympus" }, "time_zone"],
    [{ time_zone: "+05:00" }, "time_zone"],
    [{ quiet_hours: { start: "22:00", end: "07:00", tz: "Nowhere/Land" } }, "quiet_hours.tz"],
    [{ quiet_hours: { start: "25:00", end: "07:00", tz: "UTC" } }, "quiet_hours.start"],
    [{ quiet_hours: { start: "22:00" } }, "quiet_hours.end"],
    [{ locale: "not a locale!" }, "locale"],
    [{ channel_optout: ["carrier_pigeon"] }, "channel_optout.0"],
    [{ category_optout: ["Not Valid"] }, "category_optout.0"],
    [{ rate_cap_per_day: 0 }, "rate_cap_per_day"],
    [{ device_tokens: [] }, "device_tokens"],
    [{ user_id: "dee" }, "user_id"],
    [{ categories: [] }, "categories"],
    [[], "(body)"],
  ];
  for (const [body, field] of cases) {
    const res = await patch(token, body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.headers.get("content-type"), "application/problem+json");
    const problem = (await res.json()) as { code: string; errors: Array<{ field: string; message: string }> };
    t.equal(problem.code, "validation_failed");
    t.ok(
      problem.errors.some((e) => e.field === field),
      `${JSON.stringify(body)} names ${field}: ${JSON.stringify(problem.errors)}`,
    );
  }
  const unknown = await patch(token, { rate_cap_per_day: 0 });
  t.match(await unknown.json(), {
    errors: [{ field: "rate_cap_per_day", message: 'unknown field "rate_cap_per_day"' }],
  });
  t.equal((await patch(token, "{")).status, 400, "malformed JSON");
  t.equal((await patch(token, "channel_optout=sms", "text/plain")).status, 415);
  t.equal(await storedRow("dee"), null, "no document was created");
});

t.test("a token opens its own user's preferences only", async (t) => {
  const eve = await mint("eve");
  const fay = await mint("fay");
  t.equal((await patch(eve, { channel_optout: ["sms"] })).status, 200);
  t.same((await centre(fay)).channel_optout, [], "another user's token reads its own user's document");
  t.equal((await patch(fay, { channel_optout: ["push"] })).status, 200);
  t.same((await serverSide("eve")).channel_optout, ["sms"], "and changes only that one");
  t.same((await serverSide("fay")).channel_optout, ["push"]);
  const noToken = await app.request("/api/v1/inbox/preferences");
  t.equal(noToken.status, 401);
  const apiKey = await app.request("/api/v1/inbox/preferences", {
    method: "PATCH",
    headers: { authorization: `Bearer ${prefsKey}`, "content-type": "application/json" },
    body: JSON.stringify({ channel_optout: [] }),
  });
  t.equal(apiKey.status, 401, "an API key opens no user's preference centre");
  t.same((await serverSide("eve")).channel_optout, ["sms"]);
});

t.test("the preference, count and mark-all routes are rate limited per token and per user", async (t) => {
  const limited = await ingestApp(t, {
    database,
    criticalCategories: CRITICAL,
    inbox: { tokenRate: { perSecond: 1, burst: 1 }, userRate: { perSecond: 1000, burst: 1000 } },
  });
  const routes: Array<[string, RequestInit]> = [
    ["/inbox/preferences", {}],
    ["/inbox/preferences", { method: "PATCH", headers: { "content-type": "application/json" }, body: "{}" }],
    ["/inbox/counts", {}],
    [
      "/inbox/mark-all",
      { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ action: "read" }) },
    ],
  ];
  for (const [path, init] of routes) {
    const token = await mint("gus", inboxKey, limited.app);
    const answers = await Promise.all(Array.from({ length: 6 }, () => asUser(token, path, init, limited.app)));
    const statuses = answers.map((a) => a.status);
    t.ok(statuses.includes(429), `${init.method ?? "GET"} ${path}: ${statuses.join(", ")}`);
    const refusal = answers.find((a) => a.status === 429);
    t.match(refusal?.headers.get("retry-after"), /^\d+$/);
    t.match(await refusal?.json(), { code: "rate_limited", detail: /inbox token/ });
  }
});
