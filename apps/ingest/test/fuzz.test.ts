import { seedApiKey, seedTemplate } from "@notify/db";
import fc from "fast-check";
import t from "tap";
import { deadLetterResponder, ingestApp } from "./support.js";

// Fuzz over every route of the public API: generated methods, paths, headers and bodies (JSON
// near the real shapes and far from them, NUL bytes, invalid UTF-8, huge numbers, wrong media
// types, hostile path segments), sent with an operator key, a narrow key, an inbox token or none.
// Whatever arrives: never a 5xx, always a JSON or problem+json answer, and after a 4xx nothing
// was stored. FUZZ_RUNS sets the number of requests (npm run fuzz: 100 000; here fewer).
const RUNS = Number(process.env.FUZZ_RUNS ?? 1500);

const { app, database, deps } = await ingestApp(t, { maxBodyBytes: 16_384 });
// The processor's answers to the dead-letter routes, which ingest asks for.
await deadLetterResponder(t, deps);
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const admin = await seedApiKey(database, { clientId: "shop", name: "admin", scopes: ["operator"] });
const narrow = await seedApiKey(database, { clientId: "shop", name: "narrow", scopes: ["ingest", "read"] });
const minted = await app.request("/api/v1/users/fuzz-user/inbox-tokens", {
  method: "POST",
  headers: { authorization: `Bearer ${admin}` },
});
const { token: inboxToken, token_id: inboxTokenId } = (await minted.json()) as { token: string; token_id: string };

/** Row counts of everything a request could store, to compare around a refused one. */
const TABLES = [
  "notifications",
  "notification_channels",
  "idempotency_keys",
  "api_keys",
  "templates",
  "template_versions",
  "audiences",
  "audience_members",
  "broadcasts",
  "user_preferences",
  "user_contacts",
  "contact_changes",
  "inbox_tokens",
  "inbox_token_revocations",
  "inbox_token_revocation_counts",
  "inbox_items",
];
const counts = async () => {
  const rows = await database.sql.unsafe(
    `select ${TABLES.map((name) => `(select count(*) from ${name})::int as ${name}`).join(", ")}`,
  );
  return rows[0] as Record<string, number>;
};

const ROUTES: Array<[string, string]> = [
  ["POST", "/notifications"],
  ["GET", "/notifications/{id}"],
  ["GET", "/users/{id}/notifications"],
  ["POST", "/keys"],
  ["GET", "/keys"],
  ["GET", "/keys/{id}"],
  ["DELETE", "/keys/{id}"],
  ["POST", "/keys/{id}/rotate"],
  ["GET", "/users/{id}/preferences"],
  ["PUT", "/users/{id}/preferences"],
  ["GET", "/users/{id}/contacts"],
  ["PUT", "/users/{id}/contacts"],
  ["POST", "/users/{id}/inbox-tokens"],
  ["DELETE", "/users/{id}/inbox-tokens"],
  ["DELETE", "/users/{id}/inbox-tokens/{tokenId}"],
  ["GET", "/templates"],
  ["GET", "/templates/{id}"],
  ["PUT", "/templates/{id}"],
  ["GET", "/templates/{id}/versions/{version}"],
  ["GET", "/dead-letters"],
  ["POST", "/audiences"],
  ["GET", "/audiences"],
  ["GET", "/audiences/{id}"],
  ["POST", "/audiences/{id}/members/import"],
  ["PUT", "/audiences/{id}/members/{userId}"],
  ["DELETE", "/audiences/{id}/members/{userId}"],
  ["POST", "/broadcasts"],
  ["GET", "/broadcasts/{id}"],
  ["POST", "/broadcasts/{id}/cancel"],
  ["GET", "/ops/users/{id}/contact-changes"],
  ["GET", "/inbox"],
  ["PATCH", "/inbox/{itemId}"],
  ["GET", "/inbox/counts"],
  ["POST", "/inbox/mark-all"],
  ["GET", "/inbox/preferences"],
  ["PATCH", "/inbox/preferences"],
];

const segment = fc.oneof(
  fc.constantFrom(
    "fuzz-user",
    "welcome",
    "1",
    "0",
    "-1",
    "99999999999999999999",
    "key_x",
    "%00",
    "%FF",
    "..",
    "%2e%2e",
    inboxTokenId,
  ),
  fc.string({ maxLength: 80 }).map(encodeURIComponent),
  fc.stringMatching(/^[A-Za-z0-9_.:-]{1,300}$/),
);
const word = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom("\u0000", "\uD800", "é", "💥", "<%= it %>", " "));
const scalar = fc.oneof(
  word,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(1e308, -0, 2 ** 53 + 1),
);
/** Objects near the real shapes (their field names, wrong or right values) and random ones. */
const field = fc.constantFrom(
  "user_id",
  "category",
  "template_id",
  "data",
  "priority",
  "channels",
  "name",
  "scopes",
  "client_id",
  "email",
  "phone",
  "push_subscriptions",
  "channel_optout",
  "category_optout",
  "quiet_hours",
  "timezone",
  "time_zone",
  "locale",
  "rate_cap_per_day",
  "audience_id",
  "variants",
  "params",
  "subject",
  "body",
  "read",
  "seen",
  "archived",
  "action",
  "before_id",
  "ttl_seconds",
  "rate_limit",
  "members",
  "__proto__",
  "constructor",
);
const value = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(field, fc.string({ maxLength: 10 })), tie("value"), { maxKeys: 6 }),
  ),
})).value;
const body = fc.oneof(
  value.map((v) => JSON.stringify(v)),
  fc.dictionary(field, value, { maxKeys: 8 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes).toString("latin1")),
  fc.constantFrom("", "{", "[]", "null", '{"user_id":"\\u0000"}', "x".repeat(20_000)),
);
const credential = fc.constantFrom<Record<string, string>>(
  { authorization: `Bearer ${admin}` },
  { authorization: `Bearer ${narrow}` },
  { "x-api-key": admin },
  { "x-inbox-token": inboxToken },
  { authorization: "Bearer ntf_forged" },
  {},
);
const contentType = fc.constantFrom(
  "application/json",
  "application/json; charset=utf-8",
  "text/plain",
  "application/x-www-form-urlencoded",
  "text/csv",
  "",
);
const request = fc.record({
  route: fc.constantFrom(...ROUTES),
  segments: fc.array(segment, { minLength: 3, maxLength: 3 }),
  query: fc.dictionary(
    fc.constantFrom("limit", "cursor", "status", "since", "until", "filter", "page", "page_size", "category", "x"),
    fc.string({ maxLength: 30 }),
    { maxKeys: 3 },
  ),
  credential,
  contentType,
  body,
  idempotencyKey: fc.option(fc.string({ maxLength: 80 }), { nil: undefined }),
});

t.test(`${RUNS} generated requests: no 5xx, and nothing stored by a refused one`, async (t) => {
  const failures: string[] = [];
  let refused = 0;
  let accepted = 0;
  await fc
    .assert(
      fc.asyncProperty(request, async (r) => {
        const [method, pattern] = r.route;
        let i = 0;
        const path = pattern.replace(/\{\w+\}/g, () => r.segments[i++] ?? "x");
        const query = new URLSearchParams(r.query).toString();
        const headers: Record<string, string> = { ...r.credential };
        if (r.contentType) headers["content-type"] = r.contentType;
        if (r.idempotencyKey !== undefined) headers["idempotency-key"] = r.idempotencyKey.replace(/[^\x20-\x7e]/g, "");
        const hasBody = method !== "GET" && method !== "DELETE";
        // Whatever writes (a DELETE too) must leave nothing behind when it is refused.
        const before = method !== "GET" ? await counts() : null;
        const response = await app.request(`/api/v1${path}${query ? `?${query}` : ""}`, {
          method,
          headers,
          ...(hasBody ? { body: r.body } : {}),
        });
        const type = response.headers.get("content-type") ?? "";
        const text = await response.text();
        const what = `${method} ${path}?${query} -> ${response.status} ${text.slice(0, 200)}`;
        if (response.status >= 500) failures.push(what);
        if (response.status >= 400 && !type.startsWith("application/problem+json"))
          failures.push(`not problem+json: ${what}`);
        if (response.status >= 400) {
          refused++;
          if (before !== null) {
            const after = await counts();
            const changed = TABLES.filter((name) => after[name] !== before[name]);
            if (changed.length > 0) failures.push(`stored ${changed.join(", ")} after ${what}`);
          }
        } else accepted++;
        return failures.length === 0;
      }),
      { numRuns: RUNS, seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined },
    )
    .catch((error: Error) => failures.push(error.message.slice(0, 2000)));
  t.same(failures, [], "no 5xx, every refusal a problem+json that stored nothing");
  t.ok(refused > 0 && accepted > 0, `both refusals (${refused}) and successes (${accepted}) were generated`);
});
