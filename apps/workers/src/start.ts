import { hostname } from "node:os";
import { busConfigFrom, connectBus } from "@notify/bus";
import { loadConfig, unsubscribeBaseUrl } from "@notify/config";
import { createDb, loadUnsubscribeKey, storeInboxItem } from "@notify/db";
import { createMetrics, listen, prepareStreams, type RunningApp, startScope } from "@notify/http";
import { createLogger } from "@notify/log";
import type { Provider } from "@notify/providers";
import { createChannelProviders, createEmailFailoverProvider } from "@notify/providers";
import { startTelemetry } from "@notify/telemetry";
import { createApp } from "./app.js";
import { WorkersConfig } from "./config.js";
import { queueDepthCollector, startConsumers } from "./consumers.js";
import { unsubscribeHeaders } from "./delivery/unsubscribe.js";
import { createUnusedClaims } from "./delivery/unused-claims.js";
import { createDeliveryMetrics } from "./metrics.js";
import { closeGates, createGates } from "./providers/gate.js";
import { startWorkerReports } from "./providers/report.js";
import { createWebhookMetrics, startWebhookSender } from "./webhooks/sender.js";

/**
 * Starts workers from its settings in `env` (this process's environment when it runs alone): its
 * connections, servers and background work; answers how to stop it. Tracing is started here
 * unless `telemetry` is false (one process running every app starts it once for all).
 */
export async function startWorkers(
  env: Record<string, string | undefined>,
  options: { telemetry?: boolean } = {},
): Promise<RunningApp> {
  const config = loadConfig(WorkersConfig, env);
  const opened = startScope();
  try {
    // First: with an OTLP endpoint set, everything after this (logs included) is traced.
    const telemetry =
      options.telemetry === false ? undefined : await startTelemetry({ service: "workers", settings: config });
    if (telemetry) opened.add(telemetry, (t) => t.shutdown());
    const log = createLogger({ name: "workers", level: config.LOG_LEVEL });

    const databases = {
      transactional: createDb({
        url: config.DATABASE_URL,
        max: config.TRANSACTIONAL_DB_POOL_SIZE,
        applicationName: "notify-workers-transactional",
        statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
      }),
      promotional: createDb({
        url: config.DATABASE_URL,
        max: config.DB_POOL_SIZE,
        applicationName: "notify-workers",
        statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
      }),
    };
    opened.add(databases, (d) => Promise.all([d.transactional.close(), d.promotional.close()]));
    const bus = await connectBus({
      ...busConfigFrom(config, "workers"),
      waitOnFirstConnect: true,
    });
    opened.add(bus, (b) => b.close());
    const registry = createMetrics("workers");
    await prepareStreams(bus, { log, metrics: registry });
    const guard = await bus.kv("notify_send_guard");
    const rateKv = await bus.kv("notify_rate");
    const breakerKv = await bus.kv("notify_breakers");

    // A channel has a pool only when its provider is on; in-app delivers to our own inbox.
    const providers: Provider[] = Object.values(
      await createChannelProviders(config, {
        timeoutMs: config.PROVIDER_TIMEOUT_MS,
        inAppStore: async (message) => {
          return storeInboxItem(databases.transactional.sql, {
            userId: message.to,
            notificationId: message.notificationId,
            category: message.category,
            title: message.subject,
            body: message.body,
          });
        },
      }),
    );

    // Email's second provider (SMTP), when configured: each provider has its own breaker and buckets.
    const emailFailover = await createEmailFailoverProvider(config, { timeoutMs: config.PROVIDER_TIMEOUT_MS });

    const metrics = createDeliveryMetrics(registry);
    // One-click unsubscribe links (RFC 8058), only where they lead somewhere this deployment serves.
    const unsubscribeUrl = unsubscribeBaseUrl(config);
    if (unsubscribeUrl === undefined && config.EMAIL_PROVIDER !== "off") {
      log.warn("UNSUBSCRIBE_BASE_URL is not set: email goes without List-Unsubscribe headers");
    }
    const listedCritical = config.UNSUBSCRIBE_CATEGORIES.filter((c) => config.CRITICAL_CATEGORIES.includes(c));
    if (unsubscribeUrl !== undefined && listedCritical.length > 0) {
      log.warn(
        { categories: listedCritical },
        "UNSUBSCRIBE_CATEGORIES lists critical categories: their email carries List-Unsubscribe, but routing ignores the opt-out it records",
      );
    }
    const unsubscribe =
      unsubscribeUrl === undefined
        ? undefined
        : unsubscribeHeaders(
            {
              baseUrl: unsubscribeUrl,
              mailto: config.UNSUBSCRIBE_MAILTO || undefined,
              categories: config.UNSUBSCRIBE_CATEGORIES,
              criticalCategories: config.CRITICAL_CATEGORIES,
            },
            () => loadUnsubscribeKey(databases.promotional),
          );
    // Read now, so the first email does not wait for it (a failure is retried by the first send).
    if (unsubscribe !== undefined) loadUnsubscribeKey(databases.promotional).catch(() => {});
    // The worker's own deadline backs up each provider's: the provider's fires first, with its reason.
    const deadlineMs = config.PROVIDER_TIMEOUT_MS + 2000;
    const gateDeps = {
      rateKv,
      breakerKv,
      worker: `${hostname()}:${process.pid}`,
      metrics,
      log,
      settings: {
        rateLimits: config.PROVIDER_RATE_LIMITS,
        defaultRate: { perSecond: config.PROVIDER_RATE_DEFAULT, burst: config.PROVIDER_RATE_DEFAULT },
        transactionalReservedPercent: config.TRANSACTIONAL_RESERVED_PERCENT,
        breaker: {
          windowCalls: config.BREAKER_WINDOW_CALLS,
          minCalls: config.BREAKER_MIN_CALLS,
          failurePercent: config.BREAKER_FAILURE_PERCENT,
          slowCallMs: config.BREAKER_SLOW_CALL_MS,
          openMs: config.BREAKER_OPEN_MS,
          halfOpenProbes: config.BREAKER_HALF_OPEN_PROBES,
        },
        deadlineMs,
      },
    };
    const gates = createGates(providers, gateDeps);
    const failoverGates = emailFailover ? createGates([emailFailover], gateDeps) : [];
    // The consumers' stop closes the gates and their providers once the consumers run; a start
    // that fails before then closes them here.
    let consuming = false;
    opened.add([...gates, ...failoverGates], (all) => (consuming ? undefined : closeGates(all)));

    let stopping = false;
    const app = createApp({
      log,
      metrics: registry,
      breakers: [...gates, ...failoverGates].map((g) => g.breaker),
      adminToken: config.WORKERS_ADMIN_TOKEN,
      checks: {
        postgres: () => databases.promotional.ping(),
        postgres_transactional: () => databases.transactional.ping(),
        nats: () => bus.isConnected(),
        // Not ready until the pools pull (reading `delivery` before then throws: a failed check).
        consumers: () => delivery.healthy() && webhooks.healthy(),
      },
      isStopping: () => stopping,
    });
    const server = await listen(app, config.PORT, config.HOST);
    opened.add(server, (s) => s.close());

    const delivery = await startConsumers({
      databases,
      bus,
      guard,
      gates,
      failovers: { email: failoverGates },
      failoverAfterAttempts: config.FAILOVER_AFTER_ATTEMPTS,
      log,
      metrics,
      maxAttempts: config.MAX_ATTEMPTS,
      retryBaseMs: config.RETRY_BASE_MS,
      retryMaxMs: config.RETRY_MAX_MS,
      // Past the deadline a live worker has had its answer; 5 s more cover the writes after it.
      claimTtlMs: deadlineMs + 5000,
      worker: `${hostname()}:${process.pid}`,
      unusedClaims: createUnusedClaims(),
      random: Math.random,
      ...(unsubscribe === undefined ? {} : { unsubscribe }),
      concurrency: { transactional: config.TRANSACTIONAL_CONCURRENCY, promotional: config.PROMOTIONAL_CONCURRENCY },
    });
    consuming = true;
    opened.add(delivery, (d) => d.stop());
    registry.collect(queueDepthCollector(bus, delivery.pools, metrics));
    // Its providers' breakers, rates and waiting sends, for the operator's GET /api/v1/ops/providers.
    const reporter = startWorkerReports({
      kv: await bus.kv("notify_workers"),
      worker: gateDeps.worker,
      gates: [...gates, ...failoverGates],
      intervalMs: config.WORKER_REPORT_INTERVAL_MS,
      log,
    });
    opened.add(reporter, (r) => r.stop());
    // Outbound webhooks: a pool of their own, so posts to a slow endpoint never queue behind sends.
    const webhookDatabase = createDb({
      url: config.DATABASE_URL,
      max: 4,
      applicationName: "notify-workers-webhooks",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    opened.add(webhookDatabase, (d) => d.close());
    const webhooks = await startWebhookSender(
      { bus, database: webhookDatabase, log, metrics: createWebhookMetrics(registry) },
      {
        concurrency: config.WEBHOOK_CONCURRENCY,
        perEndpoint: config.WEBHOOK_ENDPOINT_CONCURRENCY,
        timeoutMs: config.WEBHOOK_TIMEOUT_MS,
        schedule: config.WEBHOOK_RETRY_SCHEDULE,
        disableAfterMs: config.WEBHOOK_DISABLE_AFTER_HOURS * 3_600_000,
        allowPrivateNetworks: config.NOTIFY_PROFILE === "development",
      },
    );
    opened.add(webhooks, (w) => w.stop());
    log.info(
      {
        port: server.port,
        providers: [...providers, ...(emailFailover ? [emailFailover] : [])].map((p) => `${p.channel}:${p.name}`),
        pools: delivery.pools.length,
      },
      "workers consuming",
    );

    return {
      log,
      shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_SECONDS * 1000,
      async stop() {
        stopping = true;
        await Promise.all([delivery.stop(), webhooks.stop()]);
        await reporter.stop();
        await bus.close();
        await Promise.all([databases.transactional.close(), databases.promotional.close(), webhookDatabase.close()]);
        await server.close();
        await telemetry?.shutdown();
      },
    };
  } catch (error) {
    await opened.close();
    throw error;
  }
}
