import { busConfigFrom, connectBus } from "@notify/bus";
import { loadConfig } from "@notify/config";
import { createDb } from "@notify/db";
import {
  createAttemptThrottle,
  createMetrics,
  listen,
  type RunningApp,
  startScope,
  trustedProxies,
} from "@notify/http";
import { createLogger } from "@notify/log";
import { startTelemetry } from "@notify/telemetry";
import { createAdminApp, createApp } from "./app.js";
import { ReceiptsConfig } from "./config.js";
import { startReceiptSweep } from "./receipts/sweep.js";

/**
 * Starts receipts from its settings in `env` (this process's environment when it runs alone): its
 * connections, servers and background work; answers how to stop it. Tracing is started here
 * unless `telemetry` is false (one process running every app starts it once for all).
 */
export async function startReceipts(
  env: Record<string, string | undefined>,
  options: { telemetry?: boolean } = {},
): Promise<RunningApp> {
  const config = loadConfig(ReceiptsConfig, env);
  const opened = startScope();
  try {
    // First: with an OTLP endpoint set, everything after this (logs included) is traced.
    const telemetry =
      options.telemetry === false ? undefined : await startTelemetry({ service: "receipts", settings: config });
    if (telemetry) opened.add(telemetry, (t) => t.shutdown());
    const log = createLogger({ name: "receipts", level: config.LOG_LEVEL });
    const database = createDb({
      url: config.DATABASE_URL,
      max: config.DB_POOL_SIZE,
      applicationName: "notify-receipts",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    opened.add(database, (d) => d.close());
    const bus = await connectBus({
      ...busConfigFrom(config, "receipts"),
      waitOnFirstConnect: true,
    });
    opened.add(bus, (b) => b.close());

    let stopping = false;
    const metrics = createMetrics("receipts");
    const proxies = trustedProxies(config.TRUSTED_PROXIES);
    const app = createApp({
      metrics,
      database,
      bus,
      log,
      isStopping: () => stopping,
      timestampWindow: {
        maxAgeSeconds: config.RECEIPTS_MAX_AGE_SECONDS,
        maxFutureSeconds: config.RECEIPTS_MAX_FUTURE_SECONDS,
      },
      ...(proxies === undefined ? {} : { trustedProxies: proxies }),
      preauthThrottle: createAttemptThrottle({
        perSecond: config.PREAUTH_RATE_PER_SECOND,
        burst: config.PREAUTH_BURST,
      }),
      unverifiedReads: {
        maxReads: config.RECEIPTS_MAX_UNVERIFIED_READS,
        maxOverBudgetReads: config.RECEIPTS_MAX_OVER_BUDGET_READS,
        maxReadsPerAddress: config.RECEIPTS_MAX_UNVERIFIED_READS_PER_ADDRESS,
        readTimeoutMs: config.RECEIPTS_UNVERIFIED_READ_TIMEOUT_MS,
      },
      maxBodyBytes: {
        sendgrid: config.RECEIPTS_SENDGRID_MAX_BODY_BYTES,
        plivo: config.RECEIPTS_PLIVO_MAX_BODY_BYTES,
      },
      ...(config.PUBLIC_BASE_URL === undefined ? {} : { publicBaseUrl: config.PUBLIC_BASE_URL }),
      ...(config.PLIVO_AUTH_TOKEN === undefined ? {} : { plivoAuthToken: config.PLIVO_AUTH_TOKEN }),
      smsReplies: { optOut: config.RECEIPTS_SMS_OPT_OUT_REPLY, optIn: config.RECEIPTS_SMS_OPT_IN_REPLY },
      ...(config.SENDGRID_WEBHOOK_PUBLIC_KEY === undefined
        ? {}
        : { sendgridPublicKey: config.SENDGRID_WEBHOOK_PUBLIC_KEY }),
    });
    const admin = await listen(
      createAdminApp({ metrics, database, bus, log, isStopping: () => stopping }),
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
    const sweep = startReceiptSweep(database.sql, log, {
      intervalMs: config.RECEIPT_SWEEP_INTERVAL_MS,
      unmatchedRetentionHours: config.RECEIPTS_UNMATCHED_RETENTION_HOURS,
      metrics,
    });
    opened.add(sweep, (job) => job.stop());
    log.info(
      {
        port: server.port,
        admin_port: admin.port,
        plivo: config.PLIVO_AUTH_TOKEN !== undefined,
        sendgrid: config.SENDGRID_WEBHOOK_PUBLIC_KEY !== undefined,
      },
      "receipts listening",
    );

    return {
      log,
      shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_SECONDS * 1000,
      async stop() {
        stopping = true;
        await server.close();
        await sweep.stop();
        await bus.close();
        await database.close();
        await admin.close();
        await telemetry?.shutdown();
      },
    };
  } catch (error) {
    await opened.close();
    throw error;
  }
}
