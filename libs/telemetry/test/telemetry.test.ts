import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { createLogger } from "@notify/log";
import {
  activeTraceparent,
  contextOf,
  extractHeaders,
  injectHeaders,
  NO_TRACE_FIELDS,
  SpanKind,
  startTelemetry,
  traceLogFields,
  tracesEndpoint,
  tracingOn,
  withContext,
  withSpan,
} from "@notify/telemetry";
import { OTLP_KIND, startOtlpReceiver } from "@notify/testing";
import t from "tap";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..", "..", "..");

const headerMap = () => {
  const map = new Map<string, string>();
  return { map, get: (k: string) => map.get(k), set: (k: string, v: string) => void map.set(k, v) };
};

t.test("the traces URL: the traces endpoint as is, else the base endpoint + /v1/traces; disabled wins", async (t) => {
  t.equal(tracesEndpoint({}), null);
  t.equal(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }), "http://c:4318/v1/traces");
  t.equal(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" }), "http://c:4318/v1/traces");
  t.equal(
    tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t/x" }),
    "http://t/x",
  );
  t.equal(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: true }), null);
});

t.test("off: nothing registered, every helper a no-op", async (t) => {
  const telemetry = await startTelemetry({ service: "test", settings: {} });
  t.equal(telemetry.enabled, false);
  t.equal(tracingOn(), false);
  let seen: unknown = "unset";
  await withSpan("x", {}, async (span) => {
    seen = span;
    t.equal(activeTraceparent(), undefined, "no span is active");
    t.equal(traceLogFields(), NO_TRACE_FIELDS);
  });
  t.equal(seen, undefined, "the function ran without a span");
  const h = headerMap();
  injectHeaders(h);
  t.equal(h.map.size, 0, "no header written");
  const incoming = headerMap();
  incoming.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  await withContext(extractHeaders(incoming), async () => {
    t.equal(activeTraceparent(), undefined, "an incoming traceparent is not even read");
  });
  await telemetry.shutdown();
});

// A child process whose module resolution refuses the SDK packages: started with tracing off it
// runs; started with an endpoint it fails, so the check could fail.
const probe = (settings: string) =>
  run(
    process.execPath,
    [
      "--conditions=@notify/source",
      "--import=tsx",
      "--import",
      `data:text/javascript,${encodeURIComponent(`
        import { register } from "node:module";
        register("data:text/javascript,${encodeURIComponent(
          `export async function resolve(s, c, next) {
            if (/@opentelemetry\\/(sdk-|exporter-|context-async-hooks|resources|core)/.test(s)) throw new Error("SDK imported: " + s);
            return next(s, c);
          }`,
        )}");`)}`,
      "--input-type=module",
      "-e",
      `import { startTelemetry, withSpan } from "@notify/telemetry";
       const telemetry = await startTelemetry({ service: "probe", settings: ${settings} });
       await withSpan("x", {}, async () => {});
       await telemetry.shutdown();
       console.log("enabled=" + telemetry.enabled);`,
    ],
    { cwd: ROOT },
  );

t.test("off: no module of the SDK is even imported", async (t) => {
  const off = await run(process.execPath, ["--version"]).then(() => probe("{}"));
  t.match(off.stdout, /enabled=false/);
  await t.rejects(probe(`{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" }`), /SDK imported/, "on: it is");
});

t.test("on: spans reach the OTLP receiver with their service, parents and the W3C context", async (t) => {
  const receiver = await startOtlpReceiver(t);
  const telemetry = await startTelemetry({
    service: "unit",
    settings: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
  });
  t.teardown(() => telemetry.shutdown());
  t.equal(telemetry.enabled, true);
  t.equal(telemetry.endpoint, `${receiver.url}/v1/traces`);
  t.equal(tracingOn(), true);

  const lines: string[] = [];
  const log = createLogger({
    name: "unit",
    level: "info",
    destination: { write: (line: string) => lines.push(line) } as unknown as NodeJS.WritableStream,
  });
  log.info("outside any span");

  const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const carried = headerMap();
  let inner = "";
  await withSpan("outer", { kind: SpanKind.SERVER, parent: contextOf(caller), attributes: { a: 1 } }, async () => {
    await withSpan("inner", {}, async () => {
      inner = activeTraceparent() ?? "";
      log.info({ step: 1 }, "inside a span");
      injectHeaders(carried);
    });
  });
  t.match(inner, /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/, "the caller's trace goes on");
  t.equal(carried.map.get("traceparent"), inner, "injected: the active span's traceparent");
  // The extracted context parents a span in another "process".
  await withSpan("remote", { kind: SpanKind.CONSUMER, parent: extractHeaders(carried) }, async () => {});
  await withSpan("failing", {}, async () => {
    throw new Error("boom");
  }).catch(() => {});
  await telemetry.shutdown();

  const spans = await receiver.waitFor((s) => (s.length >= 4 ? s : undefined));
  const byName = new Map(spans.map((s) => [s.name, s]));
  const outer = byName.get("outer");
  const innerSpan = byName.get("inner");
  const remote = byName.get("remote");
  t.equal(outer?.service, "notify-unit", "service.name defaults to notify-<app>");
  t.equal(outer?.traceId, "0af7651916cd43dd8448eb211c80319c");
  t.equal(outer?.parentSpanId, "b7ad6b7169203331", "outer is the caller's child");
  t.equal(outer?.kind, OTLP_KIND.server);
  t.same(outer?.attributes, { a: 1 });
  t.equal(innerSpan?.parentSpanId, outer?.spanId);
  t.equal(remote?.parentSpanId, innerSpan?.spanId, "extract(inject(ctx)) parents the next span");
  t.equal(remote?.kind, OTLP_KIND.consumer);
  t.equal(byName.get("failing")?.status.code, 2, "a thrown error marks the span failed");

  const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.notOk("trace_id" in (parsed[0] ?? {}), "a line outside any span has no trace id");
  t.equal(parsed[1]?.trace_id, "0af7651916cd43dd8448eb211c80319c", "a line inside a span has its trace id");
  t.equal(parsed[1]?.span_id, innerSpan?.spanId);
  t.equal(parsed[1]?.step, 1, "and its own fields");
  t.equal(tracingOn(), false, "off again after shutdown");
  t.equal(traceLogFields(), NO_TRACE_FIELDS);
});
