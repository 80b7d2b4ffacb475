import { captureLogger } from "@notify/testing";
import t from "tap";
import { createMetrics, mountHealth, mountMetrics, newApp, noteAccess } from "../src/index.js";

const SECRET = "nk_live_0123456789abcdefghijklmnopqrstuv";

function setup() {
  const { log, lines } = captureLogger("access");
  const metrics = createMetrics("test");
  const app = newApp(log, { metrics });
  app.use("/api/*", async (c, next) => {
    // What an authentication middleware leaves behind: the principal, never the key.
    (c as unknown as { set(k: string, v: unknown): void }).set("principal", { clientId: "shop", keyId: "k1" });
    await next();
  });
  app.get("/api/things/:id", (c) => c.json({ id: c.req.param("id") }));
  mountHealth(app, {}, () => false);
  mountMetrics(app, metrics);
  const records = () => lines().map((line) => JSON.parse(line) as Record<string, unknown>);
  return { app, metrics, records };
}

t.test("one access line per request at info: method, route pattern, status, duration, client id", async (t) => {
  const { app, records } = setup();
  const response = await app.request(`/api/things/user-42?token=${SECRET}`, { headers: { "x-api-key": SECRET } });
  t.equal(response.status, 200);
  const access = records().filter((r) => r.msg === "request");
  t.equal(access.length, 1);
  t.match(access[0], { level: 30, method: "GET", route: "/api/things/:id", status: 200, client_id: "shop" });
  t.type(access[0]?.ms, "number");
  const text = JSON.stringify(records());
  t.notOk(text.includes(SECRET), "no key or token in any line");
  t.notOk(text.includes("user-42"), "the path's ids stay out: the route pattern is logged");
});

t.test("probes and scrapes are logged at debug; an unknown path is one route", async (t) => {
  const { app, records } = setup();
  await app.request("/readyz");
  await app.request("/metrics");
  await app.request("/no/such/path/123");
  const access = records().filter((r) => r.msg === "request");
  t.same(
    access.map((r) => [r.level, r.route, r.status]),
    [
      [20, "/readyz", 200],
      [20, "/metrics", 200],
      [30, "(unmatched)", 404],
    ],
  );
});

t.test("request durations are a histogram by method, route pattern and status", async (t) => {
  const { app, metrics } = setup();
  await app.request("/api/things/a");
  await app.request("/api/things/b");
  const text = await metrics.render();
  t.match(text, /^# TYPE http_request_duration_seconds histogram$/m);
  t.match(text, /^http_request_duration_seconds_count\{method="GET",route="\/api\/things\/:id",status="200"\} 2$/m);
  t.notMatch(text, /things\/a/, "no raw path in a label");
});

t.test("several apps may report to one registry", async (t) => {
  const { log } = captureLogger("access");
  const metrics = createMetrics("test");
  const first = newApp(log, { metrics });
  const second = newApp(log, { metrics });
  first.get("/a", (c) => c.text("a"));
  second.get("/b", (c) => c.text("b"));
  await first.request("/a");
  await second.request("/b");
  const text = await metrics.render();
  t.match(text, /route="\/a"/);
  t.match(text, /route="\/b"/);
});

t.test("the access line redacts a secret a route notes, and carries the request's bindings once", async (t) => {
  const { log, lines } = captureLogger("access");
  const app = newApp(log);
  app.use("/api/*", async (c, next) => {
    c.set("log", c.get("log").child({ client_id: "shop", key_id: "k1" }));
    await next();
  });
  app.get("/api/noted", (c) => {
    noteAccess(c, { token: SECRET, events: 3 });
    return c.text("ok");
  });
  await app.request("/api/noted", { headers: { "x-request-id": "req-1" } });
  const line = lines().find((l) => l.includes('"msg":"request"')) as string;
  t.notOk(line.includes(SECRET), "a top-level secret key is redacted on the access line too");
  t.match(JSON.parse(line), { request_id: "req-1", client_id: "shop", key_id: "k1", events: 3, token: "[redacted]" });
  t.equal(line.split('"client_id"').length - 1, 1, "client_id once");
});
