import type { Bus } from "@notify/bus";
import type { Database } from "@notify/db";
import {
  type AttemptThrottle,
  createAdminApp as adminApp,
  createAttemptThrottle,
  type MetricsRegistry,
  mountLiveness,
  newApp,
  throttleFailedAttempts,
} from "@notify/http";
import type { Logger } from "@notify/log";
import { sendgridPublicKey } from "@notify/providers/sendgrid/event-webhook";
import { receiptMetrics } from "./webhooks/metrics.js";
import { mountPlivoWebhook } from "./webhooks/plivo.js";
import { mountSendgridWebhook, type TimestampWindow } from "./webhooks/sendgrid.js";

export interface ReceiptsDeps {
  /** Where the request-duration histogram goes; none in most tests. */
  metrics?: MetricsRegistry;
  database: Database;
  bus: Bus;
  log: Logger;
  isStopping: () => boolean;
  /**
   * Failed signature checks per source address (default: 2 per second with a burst of 60, as
   * PREAUTH_RATE_PER_SECOND and PREAUTH_BURST): an address past it is answered 429 unverified.
   */
  preauthThrottle?: AttemptThrottle;
  publicBaseUrl?: string;
  plivoAuthToken?: string;
  /** SendGrid's verification key: base64 DER or PEM. */
  sendgridPublicKey?: string;
  /** How old (and how far ahead) a SendGrid post's signed timestamp may be: 600 s and 60 s unless set. */
  timestampWindow?: TimestampWindow;
}

const DEFAULT_WINDOW: TimestampWindow = { maxAgeSeconds: 600, maxFutureSeconds: 60 };

/** Readiness (Postgres and NATS answer, not stopping) and metrics, on the operator's port. */
export function createAdminApp(deps: Pick<ReceiptsDeps, "log" | "database" | "bus" | "isStopping" | "metrics">) {
  return adminApp(
    deps.log,
    { postgres: () => deps.database.ping(), nats: () => deps.bus.isConnected() },
    deps.isStopping,
    deps.metrics,
  );
}

/** Provider receipts: each provider's webhook is served once its verification secret is configured. */
export function createApp(deps: ReceiptsDeps) {
  const app = newApp(deps.log, deps.metrics === undefined ? {} : { metrics: deps.metrics });
  mountLiveness(app);
  const counters = receiptMetrics(deps.metrics);
  // Before any signature is checked: a provider's valid posts never spend the budget.
  app.use(
    "/webhooks/*",
    throttleFailedAttempts(deps.preauthThrottle ?? createAttemptThrottle({ perSecond: 2, burst: 60 })),
  );
  const publicBaseUrl = deps.publicBaseUrl === undefined ? {} : { publicBaseUrl: deps.publicBaseUrl };
  if (deps.plivoAuthToken !== undefined) {
    mountPlivoWebhook(app, {
      sql: deps.database.sql,
      authToken: deps.plivoAuthToken,
      metrics: counters,
      ...publicBaseUrl,
    });
  }
  if (deps.sendgridPublicKey !== undefined) {
    mountSendgridWebhook(app, {
      sql: deps.database.sql,
      publicKey: sendgridPublicKey(deps.sendgridPublicKey),
      window: deps.timestampWindow ?? DEFAULT_WINDOW,
      metrics: counters,
    });
  }
  return app;
}
