import { randomUUID } from "node:crypto";
import { seedApiKey, seedTemplate } from "@notify/db";
import t from "tap";
import { createApp } from "../src/app.js";
import { createRateLimiter } from "../src/auth/rate-limit.js";
import type { IngestDeps } from "../src/deps.js";
import { ingestApp } from "./support.js";

const { deps: base, database } = await ingestApp(t);
const deps = (extra: Partial<IngestDeps> = {}): IngestDeps => ({ ...base, ...extra });
await seedTemplate(database, {
  id: "welcome",
  params: [],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hi" }],
});
const key = await seedApiKey(database, { clientId: "shop", name: "k", scopes: ["ingest", "read"] });
const body = JSON.stringify({
  user_id: "u1",
  category: "orders",
  template_id: "welcome",
  data: {},
  priority: "transactional",
});
const post = (app: ReturnType<typeof createApp>, apiKey = key) =>
  app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": apiKey, "content-type": "application/json", "idempotency-key": randomUUID() },
    body,
  });

t.test("inbound leaky bucket per key: the queue drains at the rate, the excess gets 429", async (t) => {
  // A frozen clock: all five arrive at the same instant, however slowly the machine runs.
  const app = createApp(deps({ rateLimiter: createRateLimiter({ perSecond: 20, burst: 3 }, () => 0) }));
  const answers = await Promise.all(Array.from({ length: 5 }, () => post(app)));
  const statuses = answers.map((a) => a.status).sort();
  t.same(statuses, [202, 202, 202, 429, 429], "three fit the queue, two are refused");
  const refused = answers.find((a) => a.status === 429) as Response;
  t.equal(refused.headers.get("content-type"), "application/problem+json");
  t.match(await refused.json(), { status: 429, code: "rate_limited" });
  t.ok(Number(refused.headers.get("retry-after")) >= 1, "Retry-After in seconds");
  t.equal(refused.headers.get("ratelimit-policy"), '"default";q=3;w=1');
  t.match(refused.headers.get("ratelimit"), /^"default";r=0;t=\d+$/);
  const accepted = answers.find((a) => a.status === 202) as Response;
  t.match(accepted.headers.get("ratelimit"), /^"default";r=\d+;t=\d+$/);

  const otherKey = await seedApiKey(database, { clientId: "blog", name: "k2", scopes: ["ingest"] });
  t.equal((await post(app, otherKey)).status, 202, "buckets are per key");
});

t.test("a key's own limit overrides the default", async (t) => {
  const app = createApp(deps({ rateLimiter: createRateLimiter({ perSecond: 1000, burst: 1000 }, () => 0) }));
  const tight = await seedApiKey(database, { clientId: "tight", name: "k3", scopes: ["ingest"] });
  await database.sql`update api_keys set rate_limit_burst = 1, rate_limit_per_second = 1 where name = 'k3'`;
  const answers = await Promise.all([post(app, tight), post(app, tight)]);
  t.same(answers.map((a) => a.status).sort(), [202, 429]);
});

t.test("a deprecated version says so on every answer and keeps working", async (t) => {
  const deprecatedAt = new Date("2026-06-01T00:00:00Z");
  const sunsetAt = new Date("2099-12-01T00:00:00Z");
  const app = createApp(deps({ lifecycle: { deprecatedAt, sunsetAt, link: "https://notify.dev/migrate/v2" } }));
  const response = await post(app);
  t.equal(response.status, 202);
  t.equal(response.headers.get("deprecation"), `@${deprecatedAt.getTime() / 1000}`, "RFC 9745 structured date");
  t.equal(response.headers.get("sunset"), "Tue, 01 Dec 2099 00:00:00 GMT", "RFC 8594 HTTP-date");
  t.equal(response.headers.get("link"), '<https://notify.dev/migrate/v2>; rel="deprecation"; type="text/html"');
  const problem = await app.request("/api/v1/notifications/nope", { headers: { "x-api-key": key } });
  t.equal(problem.status, 404);
  t.ok(problem.headers.get("deprecation"), "errors carry the headers too");
  t.notOk((await app.request("/healthz")).headers.get("deprecation"), "only versioned paths");
});

t.test("after its sunset date the version answers 410", async (t) => {
  const app = createApp(
    deps({ lifecycle: { deprecatedAt: new Date("2025-01-01T00:00:00Z"), sunsetAt: new Date("2026-01-01T00:00:00Z") } }),
  );
  const gone = await post(app);
  t.equal(gone.status, 410);
  t.equal(gone.headers.get("content-type"), "application/problem+json");
  t.match(await gone.json(), { status: 410, code: "version_sunset" });
  t.equal(gone.headers.get("sunset"), "Thu, 01 Jan 2026 00:00:00 GMT");
});
