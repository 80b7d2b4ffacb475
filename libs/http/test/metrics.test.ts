import { createLogger } from "@notify/log";
import t from "tap";
import { createMetrics, METRICS_CONTENT_TYPE, MetricsRegistry, mountMetrics, newApp } from "../src/index.js";

/** A histogram bucket's `le` goes last whatever the exposition's order, which carries no meaning. */
const leLast = (key: string) => key.replace(/\{le="([^"]*)",(.*)\}$/, '{$2,le="$1"}');

/** The sample lines of an exposition, as "name{labels}" -> value. */
function samples(text: string): Map<string, number> {
  const map = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^(\S+?(?:\{.*\})?) (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    map.set(leLast(match[1] as string), Number(match[2]));
  }
  return map;
}

t.test("counters, gauges and histograms render in the text exposition format", async (t) => {
  const registry = new MetricsRegistry();
  const sends = registry.counter("sends_total", "Provider sends", ["provider", "outcome"]);
  const depth = registry.gauge("queue_depth", "Waiting items", ["lane"]);
  const wait = registry.histogram("wait_seconds", "Waits", [0.1, 1], ["lane"]);
  sends.inc({ provider: "sendgrid", outcome: "accepted" });
  sends.inc({ provider: "sendgrid", outcome: "accepted" }, 2);
  depth.set({ lane: "promotional" }, 7);
  depth.dec({ lane: "promotional" });
  for (const value of [0.05, 0.5, 0.5, 3]) wait.observe({ lane: "transactional" }, value);

  const text = await registry.render();
  t.match(text, /^# HELP sends_total Provider sends\n# TYPE sends_total counter$/m);
  t.match(text, /^# TYPE wait_seconds histogram$/m);
  const s = samples(text);
  t.equal(s.get('sends_total{provider="sendgrid",outcome="accepted"}'), 3);
  t.equal(s.get('queue_depth{lane="promotional"}'), 6);
  t.equal(s.get('wait_seconds_bucket{lane="transactional",le="0.1"}'), 1, "buckets are cumulative");
  t.equal(s.get('wait_seconds_bucket{lane="transactional",le="1"}'), 3);
  t.equal(s.get('wait_seconds_bucket{lane="transactional",le="+Inf"}'), 4);
  t.equal(s.get('wait_seconds_count{lane="transactional"}'), 4);
  t.equal(s.get('wait_seconds_sum{lane="transactional"}'), 4.05);
  t.ok(text.endsWith("\n"), "ends with a newline");
});

t.test("label values and help text are escaped", async (t) => {
  const registry = new MetricsRegistry();
  registry.gauge("g", "help with \\ and\nnewline", ["v"]).set({ v: 'a"b\\c\nd' }, 1);
  const text = await registry.render();
  t.match(text, "# HELP g help with \\\\ and\\nnewline");
  t.match(text, 'g{v="a\\"b\\\\c\\nd"} 1');
});

t.test("misuse is refused at once, not at scrape time", async (t) => {
  const registry = new MetricsRegistry();
  const c = registry.counter("c_total", "c", ["a"]);
  t.throws(() => c.inc({}), /labels must be exactly a/);
  t.throws(() => c.inc({ a: "x", b: "y" }), /labels must be exactly a/);
  t.throws(() => c.inc({ a: "x" }, -1), /only goes up/);
  t.throws(() => registry.gauge("c_total", "again"), /registered twice/);
  t.throws(() => registry.gauge("bad-name", "x"), /invalid metric name/);
  t.throws(() => registry.histogram("h", "h", [1], ["le"]), /reserved/);
});

t.test("collectors run before each scrape; a failing one is counted and does not break the scrape", async (t) => {
  const registry = new MetricsRegistry();
  const depth = registry.gauge("depth", "d");
  let n = 0;
  registry.collect(() => depth.set({}, ++n));
  registry.collect(async () => {
    throw new Error("nats down");
  });
  t.equal(samples(await registry.render()).get("depth"), 1);
  const second = samples(await registry.render());
  t.equal(second.get("depth"), 2);
  t.equal(second.get("metrics_collector_errors_total"), 2);
});

t.test("GET /metrics serves the registry with the exposition content type and process series", async (t) => {
  const app = newApp(createLogger({ name: "test", level: "silent" }));
  mountMetrics(app, createMetrics("ingest"));
  const response = await app.request("/metrics");
  t.equal(response.status, 200);
  t.equal(response.headers.get("content-type"), METRICS_CONTENT_TYPE);
  const s = samples(await response.text());
  t.equal(s.get('notify_app_info{app="ingest"}'), 1);
  t.ok((s.get("process_resident_memory_bytes") ?? 0) > 0);
  t.ok((s.get("process_cpu_seconds_total") ?? -1) >= 0);
});

t.test("the event loop's delay series read its delay, not the sampling interval", async (t) => {
  const metrics = createMetrics("lag-test");
  await metrics.render(); // starts the series' window
  await new Promise((resolve) => setTimeout(resolve, 600));
  const idle = samples(await metrics.render());
  t.ok((idle.get("nodejs_eventloop_lag_p50_seconds") ?? 1) < 0.05, "idle: about 0, not the interval");
  t.ok((idle.get("nodejs_eventloop_lag_min_seconds") ?? 1) < 0.05, "idle: the least delay about 0");
  // A stall of 300 ms shows in the max: the next sample comes 200-300 ms late (one was due
  // within the 100 ms before it began).
  await new Promise((resolve) => setTimeout(resolve, 150));
  const until = performance.now() + 300;
  while (performance.now() < until) {}
  await new Promise((resolve) => setTimeout(resolve, 250));
  const stalled = samples(await metrics.render());
  const max = stalled.get("nodejs_eventloop_lag_max_seconds") ?? 0;
  t.ok(max >= 0.15 && max < 0.45, `the stall in the max: ${max} s`);
});
