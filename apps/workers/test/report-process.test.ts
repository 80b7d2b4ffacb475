import { readWorkerReports } from "@notify/bus";
import { startSendgridSandbox } from "@notify/devstack";
import { eventually, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { spawnWorker } from "./process-helpers.js";

// A real worker process (apps/workers/dist/main.js) reports its providers to notify_workers
// every WORKER_REPORT_INTERVAL_MS, and removes its report when it is stopped (SIGTERM).
const { url } = await freshDatabase(t);
const bus = await freshBus(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());

t.test("a running worker process is reported; a stopped one is not", async (t) => {
  const worker = await spawnWorker(t, {
    databaseUrl: url,
    bus,
    sandboxUrl: sandbox.url,
    env: { WORKER_REPORT_INTERVAL_MS: "200", PROVIDER_RATE_LIMITS: "sendgrid=50:10" },
  });
  const report = await eventually(async () => (await readWorkerReports(bus))[0], 10_000, "the worker's report");
  t.match(report.worker, /^.+:\d+$/, "host:pid");
  const sendgrid = report.providers.find((p) => p.provider === "sendgrid");
  t.match(sendgrid, {
    channel: "email",
    breaker: "closed",
    lanes: {
      transactional: { rate_per_second: 10, burst: 2, waiting: 0 },
      promotional: { rate_per_second: 40, burst: 8, waiting: 0 },
    },
  });
  const first = Date.parse(report.reported_at);
  await eventually(
    async () => (Date.parse((await readWorkerReports(bus))[0]?.reported_at ?? "") > first ? true : undefined),
    5000,
    "a later report",
  );
  await worker.proc.stop(10_000);
  t.same(await readWorkerReports(bus), [], "its report is removed at stop");
});
