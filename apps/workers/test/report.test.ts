import { setTimeout as sleep } from "node:timers/promises";
import { readBreakerDecisions, readWorkerReports } from "@notify/bus";
import { startSendgridSandbox } from "@notify/devstack";
import { createMetrics } from "@notify/http";
import { createSendgridProvider } from "@notify/providers";
import { captureLogger, eventually, freshBus } from "@notify/testing";
import t from "tap";
import { createDeliveryMetrics } from "../src/metrics.js";
import { createGates, type ProviderGate } from "../src/providers/gate.js";
import { startWorkerReports } from "../src/providers/report.js";

// Each worker process reports its providers to notify_workers every interval: its breaker, its
// buckets' rates and the sends waiting for a token; it removes its report when it stops. What
// GET /api/v1/ops/providers reads (libs/bus readWorkerReports).
const bus = await freshBus(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const { log } = captureLogger("workers");
const worker = "worker-host:4242";

const gates = createGates(
  [createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 })],
  {
    rateKv: await bus.kv("notify_rate"),
    breakerKv: await bus.kv("notify_breakers"),
    worker,
    metrics: createDeliveryMetrics(createMetrics("workers")),
    log,
    settings: {
      rateLimits: { sendgrid: { perSecond: 100, burst: 50 } },
      defaultRate: { perSecond: 1000, burst: 1000 },
      transactionalReservedPercent: 20,
      breaker: {
        windowCalls: 10,
        minCalls: 2,
        failurePercent: 50,
        slowCallMs: 60_000,
        openMs: 60_000,
        halfOpenProbes: 1,
      },
      deadlineMs: 4000,
    },
  },
);
const gate = gates[0] as ProviderGate;
t.teardown(() => gate.close());

t.test("reports every interval, shows a breaker its calls opened, and removes the report at stop", async (t) => {
  const reporter = startWorkerReports({ kv: await bus.kv("notify_workers"), worker, gates, intervalMs: 100, log });
  const first = await eventually(async () => (await readWorkerReports(bus))[0], 5000, "a first report");
  t.match(first, {
    worker,
    providers: [
      {
        provider: "sendgrid",
        channel: "email",
        breaker: "closed",
        lanes: {
          transactional: { rate_per_second: 20, burst: 10, waiting: 0 },
          promotional: { rate_per_second: 80, burst: 40, waiting: 0 },
        },
      },
    ],
  });
  await sleep(250);
  const later = (await readWorkerReports(bus))[0];
  t.ok(Date.parse(later?.reported_at ?? "") > Date.parse(first.reported_at), "written again at the interval");

  sandbox.fault({ status: 503 });
  for (let n = 0; n < 3; n++) {
    await gate.send({
      notificationId: `n-${n}`,
      channel: "email",
      to: "ada@example.com",
      subject: "Hi",
      body: "<p>Hi</p>",
      category: "news",
      priority: "transactional",
    });
  }
  t.equal(gate.breaker.state(), "open", "its own calls opened it");
  const open = await eventually(
    async () => {
      const [report] = await readWorkerReports(bus);
      return report?.providers[0]?.breaker === "open" ? report : undefined;
    },
    5000,
    "the open breaker reported",
  );
  t.equal(open.worker, worker);
  const decision = await eventually(async () => (await readBreakerDecisions(bus, ["sendgrid"])).get("sendgrid"), 5000);
  t.match(decision, { state: "open", by: worker }, "and shared as the decision of this process");

  await reporter.stop();
  t.same(await readWorkerReports(bus), [], "a stopped process's report is removed");
  await sleep(250);
  t.same(await readWorkerReports(bus), [], "and not written again");
});
