import { busConfigFrom, connectBus, onInboxTokensRevoked, onKeyChanged, onTemplateChanged } from "@notify/bus";
import { loadConfig } from "@notify/config";
import { consoleRefusal } from "@notify/console";
import { createDb } from "@notify/db";
import {
  createAttemptThrottle,
  createMetrics,
  listen,
  prepareStreams,
  type RunningApp,
  startScope,
  trustedProxies,
} from "@notify/http";
import { createLogger } from "@notify/log";
import { startTelemetry } from "@notify/telemetry";
import { createAdminApp, createApp } from "./app.js";
import { createKeyLookup } from "./auth/api-keys.js";
import { createRateLimiter } from "./auth/rate-limit.js";
import { IngestConfig } from "./config.js";
import { createInboxRevocations } from "./inbox/revocations.js";
import { createIngestor } from "./notifications/create.js";
import { startMaintenance } from "./notifications/maintenance.js";
import { createTemplateLookup } from "./notifications/templates.js";

/**
 * Starts ingest from its settings in `env` (this process's environment when it runs alone): its
 * connections, servers and background work; answers how to stop it. Tracing is started here
 * unless `telemetry` is false (one process running every app starts it once for all).
 */
export async function startIngest(
  env: Record<string, string | undefined>,
  options: { telemetry?: boolean } = {},
): Promise<RunningApp> {
  const config = loadConfig(IngestConfig, env);
  const opened = startScope();
  try {
    // First: with an OTLP endpoint set, everything after this (logs included) is traced.
    const telemetry =
      options.telemetry === false ? undefined : await startTelemetry({ service: "ingest", settings: config });
    if (telemetry) opened.add(telemetry, (t) => t.shutdown());
    const log = createLogger({ name: "ingest", level: config.LOG_LEVEL });
    const database = createDb({
      url: config.DATABASE_URL,
      max: config.DB_POOL_SIZE,
      applicationName: "notify-ingest",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    opened.add(database, (d) => d.close());
    // The in-app inbox's own pool: users' clients never take the connections the accept path needs.
    const inboxDatabase = createDb({
      url: config.DATABASE_URL,
      max: config.INBOX_DB_POOL_SIZE,
      applicationName: "notify-ingest-inbox",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    opened.add(inboxDatabase, (d) => d.close());
    // At start ingest waits for NATS; once running, a lost connection makes POST answer 503 until it is back.
    const bus = await connectBus({
      ...busConfigFrom(config, "ingest"),
      publishTimeoutMs: config.PUBLISH_TIMEOUT_MS,
      waitOnFirstConnect: true,
    });
    opened.add(bus, (b) => b.close());
    const metrics = createMetrics("ingest");
    await prepareStreams(bus, { log, metrics });

    const lookupKey = createKeyLookup(database, config.AUTH_CACHE_TTL_SECONDS * 1000, { log });
    opened.add(lookupKey, (l) => l.close());
    // Before the first request: until the secret and the active keys are read, every key would
    // be looked up against the budget.
    await lookupKey.ready;
    // A key created, revoked or rotated by any instance or the CLI reaches every instance's caches at once.
    const stopHearingKeys = onKeyChanged(bus, (event) => lookupKey.forget(event.key_id));
    opened.add(stopHearingKeys, (stop) => stop());
    // Inbox token revocations, held in memory: one made on any instance reaches every one at once.
    const inboxRevocations = createInboxRevocations(inboxDatabase, {
      refreshMs: config.INBOX_REVOCATION_REFRESH_SECONDS * 1000,
      log,
    });
    opened.add(inboxRevocations, (r) => r.close());
    const stopHearingRevocations = onInboxTokensRevoked(bus, (event) =>
      inboxRevocations.add({
        clientId: event.client_id,
        userId: event.inbox_user_id,
        tokenId: event.token_id,
        revokedAt: new Date(event.revoked_at),
      }),
    );
    opened.add(stopHearingRevocations, (stop) => stop());
    const templates = createTemplateLookup(database);
    // So does a template given a version on any instance: the next POST anywhere pins the new version.
    const stopHearingTemplates = onTemplateChanged(bus, (event) => templates.forget(event.template_id));
    opened.add(stopHearingTemplates, (stop) => stop());
    const ingestor = createIngestor({ database, bus, log, templates }, { queueLimit: config.INGEST_QUEUE_LIMIT });
    opened.add(ingestor, (i) => i.drain());
    let stopping = false;
    // One budget of failed authentications per address for the API and the console's sign-in alike.
    const preauthThrottle = createAttemptThrottle({
      perSecond: config.PREAUTH_RATE_PER_SECOND,
      burst: config.PREAUTH_BURST,
    });
    const proxies = trustedProxies(config.TRUSTED_PROXIES);
    const app = createApp({
      metrics,
      database,
      bus,
      log,
      lookupKey,
      rateLimiter: createRateLimiter({ perSecond: config.RATE_LIMIT_PER_SECOND, burst: config.RATE_LIMIT_BURST }),
      preauthThrottle,
      ...(proxies === undefined ? {} : { trustedProxies: proxies }),
      allowPrivatePushEndpoints: config.NOTIFY_PROFILE === "development",
      webhookAllowPrivateNetworks: config.NOTIFY_PROFILE === "development",
      lifecycle: {
        deprecatedAt: config.API_V1_DEPRECATED_AT,
        sunsetAt: config.API_V1_SUNSET_AT,
        link: config.API_V1_DEPRECATION_LINK,
      },
      templates,
      ingestor,
      maxBodyBytes: config.MAX_BODY_BYTES,
      cursorSecret: config.CURSOR_SECRET,
      inboxDatabase,
      inboxRevocations,
      inbox: {
        tokenRate: { perSecond: config.INBOX_TOKEN_RATE_PER_SECOND, burst: config.INBOX_TOKEN_RATE_BURST },
        userRate: { perSecond: config.INBOX_USER_RATE_PER_SECOND, burst: config.INBOX_USER_RATE_BURST },
        streamsPerToken: config.INBOX_STREAMS_PER_TOKEN,
        streamsPerUser: config.INBOX_STREAMS_PER_USER,
        streamsPerClient: config.INBOX_STREAMS_PER_CLIENT,
        streamsPerProcess: config.INBOX_STREAMS_MAX,
        revocationsPerClient: config.INBOX_REVOCATIONS_PER_CLIENT,
        pollMs: config.INBOX_POLL_MS,
        keepAliveMs: config.INBOX_KEEPALIVE_SECONDS * 1000,
        corsOrigins: config.INBOX_CORS_ORIGINS,
      },
      criticalCategories: config.CRITICAL_CATEGORIES,
      isStopping: () => stopping,
    });
    // The console carries operator keys and sessions: never over plain HTTP beyond this machine.
    const consoleOff = config.CONSOLE_ENABLED
      ? consoleRefusal({ host: config.ADMIN_HOST, tls: config.CONSOLE_TLS })
      : undefined;
    if (consoleOff !== undefined) log.warn({ admin_host: config.ADMIN_HOST }, consoleOff);
    const admin = await listen(
      createAdminApp({
        metrics,
        database,
        bus,
        log,
        ...(proxies === undefined ? {} : { trustedProxies: proxies }),
        isStopping: () => stopping,
        ...(config.CONSOLE_ENABLED && consoleOff === undefined
          ? {
              console: {
                api: app,
                preauthThrottle,
                vouches: lookupKey.vouches,
                tls: config.CONSOLE_TLS,
                ...(config.CONSOLE_TRACE_URL ? { traceUrl: config.CONSOLE_TRACE_URL } : {}),
              },
            }
          : {}),
      }),
      config.ADMIN_PORT,
      config.ADMIN_HOST,
    );
    opened.add(admin, (s) => s.close());
    const server = await listen(app, config.PORT, config.HOST, {
      headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    });
    opened.add(server, (s) => s.close());
    const maintenance = startMaintenance(
      { database, bus, log },
      { intervalMs: config.RECOVERY_INTERVAL_MS, graceMs: config.RECOVERY_GRACE_MS },
    );
    opened.add(maintenance, (m) => m.stop());
    log.info({ port: server.port, admin_port: admin.port }, "ingest listening");

    return {
      log,
      shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_SECONDS * 1000,
      async stop() {
        stopping = true;
        await server.close();
        await ingestor.drain();
        await maintenance.stop();
        stopHearingKeys();
        lookupKey.close();
        stopHearingRevocations();
        inboxRevocations.close();
        stopHearingTemplates();
        await bus.close();
        await database.close();
        await inboxDatabase.close();
        await admin.close();
        await telemetry?.shutdown();
      },
    };
  } catch (error) {
    await opened.close();
    throw error;
  }
}
