import { hostname } from "node:os";
import { busConfigFrom, connectBus, loadTopologyFile } from "@notify/bus";
import { archiveTarget, loadConfig } from "@notify/config";
import { createDb } from "@notify/db";
import {
  createMetrics,
  listen,
  mountHealth,
  mountMetrics,
  newApp,
  prepareStreams,
  type RunningApp,
  startScope,
  toAppError,
} from "@notify/http";
import { createLogger } from "@notify/log";
import { openArchiveStore, startCancelResponder, startDeadLetterResponder } from "@notify/ops";
import { startTelemetry } from "@notify/telemetry";
import { startExpander } from "./broadcasts/expander.js";
import { ProcessorConfig } from "./config.js";
import { laneDeps } from "./consumers.js";
import { startScheduler } from "./deferral/scheduler.js";
import { startFallbacks } from "./fallback/job.js";
import { laneBacklogCollector, orderHoldCounter, poisonCounter, reconcilerCounter } from "./metrics.js";
import { type LeasedPartitions, SINGLETON, startLeasedPartitions } from "./partitions.js";
import { startReconciler } from "./reconciler/reconciler.js";
import { startRetention } from "./retention/job.js";
import { startWebhookDispatcher } from "./webhooks/dispatcher.js";

/**
 * Starts processor from its settings in `env` (this process's environment when it runs alone): its
 * connections, servers and background work; answers how to stop it. Tracing is started here
 * unless `telemetry` is false (one process running every app starts it once for all).
 */
export async function startProcessor(
  env: Record<string, string | undefined>,
  options: { telemetry?: boolean } = {},
): Promise<RunningApp> {
  const config = loadConfig(ProcessorConfig, env);
  const opened = startScope();
  try {
    // First: with an OTLP endpoint set, everything after this (logs included) is traced.
    const telemetry =
      options.telemetry === false ? undefined : await startTelemetry({ service: "processor", settings: config });
    if (telemetry) opened.add(telemetry, (t) => t.shutdown());
    const log = createLogger({ name: "processor", level: config.LOG_LEVEL });
    const database = createDb({
      url: config.DATABASE_URL,
      max: config.DB_POOL_SIZE,
      applicationName: "notify-processor",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    opened.add(database, (d) => d.close());
    const transactionalDatabase = createDb({
      url: config.DATABASE_URL,
      max: config.TRANSACTIONAL_DB_POOL_SIZE,
      applicationName: "notify-processor-transactional",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    opened.add(transactionalDatabase, (d) => d.close());
    const bus = await connectBus({
      ...busConfigFrom(config, "processor"),
      waitOnFirstConnect: true,
    });
    opened.add(bus, (b) => b.close());
    const topology = loadTopologyFile();
    const metrics = createMetrics("processor");
    await prepareStreams(bus, { log, metrics, topology });

    let stopping = false;
    let partitions: LeasedPartitions | undefined;
    const app = newApp(log, { metrics });
    mountHealth(
      app,
      {
        postgres: () => database.ping(),
        postgres_transactional: () => transactionalDatabase.ping(),
        nats: () => bus.isConnected(),
        // An instance may hold no partition (more instances than partitions); one that cannot beat
        // in notify_leases, or has lost a consumer it holds, is not ready.
        consumers: () => partitions?.leases.healthy() === true && partitions.runners().every((r) => r.healthy()),
      },
      () => stopping,
    );
    mountMetrics(app, metrics);
    metrics.collect(laneBacklogCollector(bus, metrics));
    const server = await listen(app, config.PORT, config.HOST);
    opened.add(server, (s) => s.close());

    const deps = {
      databases: { transactional: transactionalDatabase, promotional: database },
      bus,
      log,
      policy: {
        criticalCategories: config.CRITICAL_CATEGORIES,
        quietHoursDropCategories: config.QUIET_HOURS_DROP_CATEGORIES,
      },
      partitionConcurrency: config.PARTITION_CONCURRENCY,
      preferenceTtlMs: config.PREFERENCE_CACHE_TTL_MS,
      onPoison: poisonCounter(metrics),
      onOrderHold: orderHoldCounter(metrics),
    };
    const instance =
      config.INSTANCE_ID ??
      `${hostname()
        .replace(/[^A-Za-z0-9_-]/g, "_")
        .slice(0, 56)}-${server.port}`;
    partitions = await startLeasedPartitions(deps, { id: instance, ttlMs: config.LEASE_TTL_SECONDS * 1000 });
    opened.add(partitions, (p) => p.stop());
    const leases = partitions.leases;
    // The periodic jobs run on one instance of the deployment: the one holding the singleton lease.
    const leader = () => leases.holds(SINGLETON);
    const scheduler = startScheduler(await laneDeps(deps, "promotional"), {
      intervalMs: config.DEFERRED_POLL_INTERVAL_MS,
      leader,
    });
    opened.add(scheduler, (job) => job.stop());
    // A fallback is most often a transactional message's next channel (a code by SMS after push).
    const fallbacks = startFallbacks(await laneDeps(deps, "transactional"), {
      intervalMs: config.FALLBACK_POLL_INTERVAL_MS,
      leader,
    });
    opened.add(fallbacks, (job) => job.stop());
    // Broadcasts are promotional: the expander shares the promotional lane's pool.
    const expander = startExpander(
      { database, bus, log },
      { intervalMs: config.BROADCAST_POLL_INTERVAL_MS, batchSize: config.BROADCAST_BATCH_SIZE, leader },
    );
    opened.add(expander, (job) => job.stop());
    const archive = opened.add(openArchiveStore(archiveTarget(config, env)), (store) => store.close());
    const retention = startRetention(
      { database, log },
      {
        intervalMs: config.RETENTION_INTERVAL_MS,
        days: config.RETENTION_DAYS,
        store: archive,
        partitionHours: config.LOG_PARTITION_HOURS,
        leader,
      },
    );
    opened.add(retention, (job) => job.stop());
    const reconciler = startReconciler(
      {
        lanes: {
          transactional: await laneDeps(deps, "transactional"),
          promotional: await laneDeps(deps, "promotional"),
        },
        database,
        bus,
        log,
        onFound: reconcilerCounter(metrics),
      },
      {
        intervalMs: config.RECONCILE_INTERVAL_MS,
        afterMs: config.RECONCILE_AFTER_SECONDS * 1000,
        lookbackMs: config.RECONCILE_LOOKBACK_HOURS * 3_600_000,
        leader,
      },
    );
    opened.add(reconciler, (job) => job.stop());
    const webhooks = startWebhookDispatcher(
      { database, bus, log },
      { intervalMs: config.WEBHOOK_POLL_INTERVAL_MS, inFlight: config.WEBHOOK_ENDPOINT_IN_FLIGHT, leader },
    );
    opened.add(webhooks, (job) => job.stop());
    // Every instance answers the operator's dead-letter reads and replays (ingest asks; one
    // instance takes each): ingest's own NATS user reads no stream.
    const deadLetters = startDeadLetterResponder({
      database,
      bus,
      log,
      criticalCategories: config.CRITICAL_CATEGORIES,
      explain: toAppError,
    });
    opened.add(deadLetters, (job) => job.stop());
    // And ingest's cancels: the send guard is the processor's to take, not ingest's.
    const cancels = startCancelResponder({ database, bus, log, explain: toAppError });
    opened.add(cancels, (job) => job.stop());
    // Nothing waits for its subscriptions to be confirmed: the client subscribes again after a
    // reconnect, so a confirmation a dropped connection cut short is no failure, and no NATS
    // error left without a handler may end the process.
    deadLetters.ready.catch(() => {});
    cancels.ready.catch(() => {});
    log.info({ port: server.port, instance }, "processor running; partitions are shared through notify_leases");

    return {
      log,
      shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_SECONDS * 1000,
      async stop() {
        stopping = true;
        await Promise.all([
          deadLetters.stop(),
          cancels.stop(),
          partitions?.stop(),
          scheduler.stop(),
          fallbacks.stop(),
          expander.stop(),
          retention.stop(),
          reconciler.stop(),
          webhooks.stop(),
        ]);
        archive.close();
        await bus.close();
        await Promise.all([database.close(), transactionalDatabase.close()]);
        await server.close();
        await telemetry?.shutdown();
      },
    };
  } catch (error) {
    await opened.close();
    throw error;
  }
}
