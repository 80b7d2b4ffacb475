import { mountLiveness, newApp } from "@notify/http";
import { startTelemetry } from "@notify/telemetry";
import { captureLogger, OTLP_KIND, startOtlpReceiver } from "@notify/testing";
import t from "tap";

// The SERVER span per request: the child of an upstream caller's traceparent, named by the
// route pattern, with the access log line inside it.
const CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

t.test("tracing off: no span, no trace id on the access log line", async (t) => {
  const { log, lines } = captureLogger("api");
  const app = newApp(log);
  app.get("/things/:id", (c) => c.json({ ok: true }));
  const res = await app.request("/things/1", { headers: { traceparent: CALLER } });
  t.equal(res.status, 200);
  const access = lines()
    .map((l) => JSON.parse(l))
    .find((l) => l.msg === "request");
  t.ok(access, "the access line");
  t.notOk("trace_id" in access, "no trace id");
});

t.test("tracing on: a SERVER span per request, child of the caller, around the access log", async (t) => {
  const receiver = await startOtlpReceiver(t);
  const telemetry = await startTelemetry({ service: "api", settings: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
  t.teardown(() => telemetry.shutdown());
  const { log, lines } = captureLogger("api");
  const app = newApp(log);
  mountLiveness(app);
  app.get("/things/:id", (c) => c.json({ ok: true }));
  app.get("/broken", () => {
    throw new Error("bug");
  });

  t.equal((await app.request("/things/42?secret=x", { headers: { traceparent: CALLER } })).status, 200);
  t.equal((await app.request("/broken")).status, 500);
  t.equal((await app.request("/healthz")).status, 200);
  await telemetry.shutdown();

  const spans = await receiver.waitFor((s) => (s.length >= 2 ? s : undefined));
  t.equal(spans.length, 2, "/healthz is not traced");
  const [ok, broken] = spans.sort((a, b) => a.name.localeCompare(b.name)).reverse();
  t.equal(ok?.name, "GET /things/:id", "named by the route pattern");
  t.equal(ok?.kind, OTLP_KIND.server);
  t.equal(ok?.traceId, "4bf92f3577b34da6a3ce929d0e0e4736", "the caller's trace");
  t.equal(ok?.parentSpanId, "00f067aa0ba902b7", "the caller's span is the parent");
  t.same(ok?.attributes, {
    "http.request.method": "GET",
    "http.route": "/things/:id",
    "http.response.status_code": 200,
  });
  t.equal(broken?.name, "GET /broken");
  t.equal(broken?.parentSpanId, null, "no traceparent: a new trace");
  t.equal(broken?.status.code, 2, "a 5xx marks the span failed");

  const access = lines()
    .map((l) => JSON.parse(l))
    .filter((l) => l.msg === "request");
  t.equal(access[0]?.trace_id, ok?.traceId, "the access log line carries the trace id");
  t.equal(access[0]?.span_id, ok?.spanId);
  t.equal(access[1]?.trace_id, broken?.traceId);
});
