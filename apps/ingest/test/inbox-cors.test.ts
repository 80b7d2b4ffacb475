import { ConfigError, parseConfig } from "@notify/config";
import { seedApiKey } from "@notify/db";
import t from "tap";
import { IngestConfig } from "../src/config.js";
import { ingestApp } from "./support.js";

// The inbox components run in the caller's product page, on another origin, and send
// X-Inbox-Token: the inbox routes answer CORS (preflights included) for the origins of
// INBOX_CORS_ORIGINS, never with credentials; the routes that take an API key answer none.

const { app, database } = await ingestApp(t, { inbox: { tokenRate: { perSecond: 1, burst: 2 } } });
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
const readKey = await seedApiKey(database, { clientId: "shop", name: "read", scopes: ["read"] });
const ORIGIN = "https://shop.example.com";

type App = Awaited<ReturnType<typeof ingestApp>>["app"];
const mint = async (on: App = app) => {
  const res = await on.request("/api/v1/users/ivy/inbox-tokens", {
    method: "POST",
    headers: { authorization: `Bearer ${inboxKey}` },
  });
  return ((await res.json()) as { token: string }).token;
};

const preflight = (path: string, method: string, on: App = app, origin = ORIGIN) =>
  on.request(path, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": "x-inbox-token,content-type,last-event-id",
    },
  });

t.test("a preflight of every inbox route is answered, without credentials", async (t) => {
  for (const [path, method] of [
    ["/api/v1/inbox", "GET"],
    ["/api/v1/inbox/1", "PATCH"],
    ["/api/v1/inbox/stream", "GET"],
    ["/api/v1/inbox/counts", "GET"],
    ["/api/v1/inbox/mark-all", "POST"],
    ["/api/v1/inbox/preferences", "PATCH"],
  ] as const) {
    const res = await preflight(path, method);
    t.equal(res.status, 204, `${method} ${path}`);
    t.equal(res.headers.get("access-control-allow-origin"), "*");
    t.match(res.headers.get("access-control-allow-methods"), method);
    const headers = (res.headers.get("access-control-allow-headers") ?? "").split(",");
    t.same(headers.sort(), ["content-type", "last-event-id", "x-inbox-token"]);
    t.equal(res.headers.get("access-control-allow-credentials"), null, "no credentials, ever");
    t.match(res.headers.get("access-control-max-age"), /^\d+$/);
  }
});

t.test("answers carry CORS, errors and refusals included, and expose Retry-After", async (t) => {
  const token = await mint();
  const ok = await app.request("/api/v1/inbox/counts", { headers: { origin: ORIGIN, "x-inbox-token": token } });
  t.equal(ok.status, 200);
  t.equal(ok.headers.get("access-control-allow-origin"), "*");
  t.match(ok.headers.get("access-control-expose-headers"), /retry-after/);
  const stream = await app.request("/api/v1/inbox/stream", { headers: { origin: ORIGIN, "x-inbox-token": token } });
  t.equal(stream.status, 200);
  t.equal(stream.headers.get("access-control-allow-origin"), "*", "the event stream too");
  await stream.body?.cancel();
  const missing = await app.request("/api/v1/inbox/counts", { headers: { origin: ORIGIN } });
  t.equal(missing.status, 401);
  t.equal(missing.headers.get("access-control-allow-origin"), "*", "a page can read why it was refused");
  const limited = await Promise.all(
    [1, 2, 3, 4].map(() =>
      app.request("/api/v1/inbox/counts", { headers: { origin: ORIGIN, "x-inbox-token": token } }),
    ),
  );
  const refusal = limited.find((r) => r.status === 429);
  t.ok(refusal, "past the token's rate limit");
  t.equal(refusal?.headers.get("access-control-allow-origin"), "*");
  t.match(refusal?.headers.get("retry-after"), /^\d+$/);
});

t.test("the routes that take an API key answer no CORS", async (t) => {
  for (const [path, method] of [
    ["/api/v1/notifications", "POST"],
    ["/api/v1/users/ivy/notifications", "GET"],
    ["/api/v1/users/ivy/inbox-tokens", "POST"],
    ["/api/v1/users/ivy/preferences", "PUT"],
  ] as const) {
    const res = await preflight(path, method);
    t.equal(res.headers.get("access-control-allow-origin"), null, `no preflight answer for ${method} ${path}`);
    t.equal(res.headers.get("access-control-allow-methods"), null);
  }
  const read = await app.request("/api/v1/users/ivy/notifications", {
    headers: { origin: ORIGIN, authorization: `Bearer ${readKey}` },
  });
  t.equal(read.status, 200);
  t.equal(read.headers.get("access-control-allow-origin"), null, "nor on its answers");
});

t.test("with INBOX_CORS_ORIGINS listing origins, only those are allowed", async (t) => {
  const { app: listed } = await ingestApp(t, {
    database,
    inbox: { corsOrigins: [ORIGIN, "http://localhost:5173"] },
  });
  const allowed = await preflight("/api/v1/inbox/counts", "GET", listed);
  t.equal(allowed.headers.get("access-control-allow-origin"), ORIGIN);
  t.match(allowed.headers.get("vary"), /origin/i);
  const other = await preflight("/api/v1/inbox/counts", "GET", listed, "https://evil.example");
  t.equal(other.headers.get("access-control-allow-origin"), null, "another origin is not allowed");
  const answer = await listed.request("/api/v1/inbox/counts", {
    headers: { origin: "https://evil.example", "x-inbox-token": await mint(listed) },
  });
  t.equal(answer.headers.get("access-control-allow-origin"), null);
});

t.test("INBOX_CORS_ORIGINS is *, or origins as browsers send them", async (t) => {
  const base = { DATABASE_URL: "postgres://localhost/notify", CURSOR_SECRET: "x".repeat(32) };
  t.equal(parseConfig(IngestConfig, base).INBOX_CORS_ORIGINS, "*", "any origin by default");
  t.same(
    parseConfig(IngestConfig, { ...base, INBOX_CORS_ORIGINS: " https://a.example.com, http://localhost:3000 " })
      .INBOX_CORS_ORIGINS,
    ["https://a.example.com", "http://localhost:3000"],
  );
  for (const bad of ["https://a.example.com/", "https://A.example.com", "a.example.com", "ftp://a.example", ","]) {
    t.throws(() => parseConfig(IngestConfig, { ...base, INBOX_CORS_ORIGINS: bad }), ConfigError, bad);
  }
  t.same(parseConfig(IngestConfig, base).CRITICAL_CATEGORIES, ["security", "otp"], "the processor's default");
});
