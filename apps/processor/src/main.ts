import { type ConsumerRunner, connectBus, loadTopologyFile, streamSettingsFrom } from "@notify/bus";
import { loadConfig } from "@notify/config";
import { createDb } from "@notify/db";
import { createMetrics, listen, mountHealth, mountMetrics, newApp, onShutdown, prepareStreams } from "@notify/http";
import { createLogger } from "@notify/log";
import { startExpander } from "./broadcasts/expander.js";
import { ProcessorConfig } from "./config.js";
import { laneDeps, startConsumers } from "./consumers.js";
import { startScheduler } from "./deferral/scheduler.js";
import { laneBacklogCollector, poisonCounter, reconcilerCounter } from "./metrics.js";
import { startReconciler } from "./reconciler/reconciler.js";
import { startRetention } from "./retention/job.js";

const config = loadConfig(ProcessorConfig, process.env);
const log = createLogger({ name: "processor", level: config.LOG_LEVEL });
const database = createDb({
  url: config.DATABASE_URL,
  max: config.DB_POOL_SIZE,
  applicationName: "notify-processor",
  statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
});
const transactionalDatabase = createDb({
  url: config.DATABASE_URL,
  max: config.TRANSACTIONAL_DB_POOL_SIZE,
  applicationName: "notify-processor-transactional",
  statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
});
const bus = await connectBus({
  servers: config.NATS_URL,
  name: "notify-processor",
  namespace: config.NATS_NAMESPACE,
  partitions: config.LANE_PARTITIONS,
  streamSettings: streamSettingsFrom(config),
  waitOnFirstConnect: true,
});
const topology = loadTopologyFile();
const metrics = createMetrics("processor");
await prepareStreams(bus, { log, metrics, topology });
// The cache's staleness bound is the bucket's TTL, so it is read from the same definition.
const prefsBucket = topology.kv.find((b) => b.bucket === "notify_prefs");

let stopping = false;
const runners: ConsumerRunner[] = [];
const app = newApp(log, { metrics });
mountHealth(
  app,
  {
    postgres: () => database.ping(),
    postgres_transactional: () => transactionalDatabase.ping(),
    nats: () => bus.isConnected(),
    consumers: () => runners.length > 0 && runners.every((r) => r.healthy()),
  },
  () => stopping,
);
mountMetrics(app, metrics);
metrics.collect(laneBacklogCollector(bus, metrics));
const server = await listen(app, config.PORT, config.HOST);

const deps = {
  databases: { transactional: transactionalDatabase, promotional: database },
  bus,
  log,
  policy: {
    criticalCategories: config.CRITICAL_CATEGORIES,
    quietHoursDropCategories: config.QUIET_HOURS_DROP_CATEGORIES,
  },
  partitionConcurrency: config.PARTITION_CONCURRENCY,
  preferenceTtlMs: (prefsBucket?.ttl_seconds ?? 5) * 1000,
  onPoison: poisonCounter(metrics),
};
runners.push(...(await startConsumers(deps)));
const scheduler = startScheduler(await laneDeps(deps, "promotional"), { intervalMs: config.DEFERRED_POLL_INTERVAL_MS });
// Broadcasts are promotional: the expander shares the promotional lane's pool.
const expander = startExpander(
  { database, bus, log },
  { intervalMs: config.BROADCAST_POLL_INTERVAL_MS, batchSize: config.BROADCAST_BATCH_SIZE },
);
const retention = startRetention(
  { database, log },
  { intervalMs: config.RETENTION_INTERVAL_MS, days: config.RETENTION_DAYS, dir: config.ARCHIVE_DIR },
);
const reconciler = startReconciler(
  {
    lanes: { transactional: await laneDeps(deps, "transactional"), promotional: await laneDeps(deps, "promotional") },
    database,
    bus,
    log,
    onFound: reconcilerCounter(metrics),
  },
  {
    intervalMs: config.RECONCILE_INTERVAL_MS,
    afterMs: config.RECONCILE_AFTER_SECONDS * 1000,
    lookbackMs: config.RECONCILE_LOOKBACK_HOURS * 3_600_000,
  },
);
log.info({ port: server.port, consumers: runners.length }, "processor consuming");

onShutdown(log, config.SHUTDOWN_TIMEOUT_SECONDS * 1000, async () => {
  stopping = true;
  await Promise.all([
    ...runners.map((r) => r.stop()),
    scheduler.stop(),
    expander.stop(),
    retention.stop(),
    reconciler.stop(),
  ]);
  await bus.close();
  await Promise.all([database.close(), transactionalDatabase.close()]);
  await server.close();
});
