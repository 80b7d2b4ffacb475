import type { Bus } from "@notify/bus";
import type { Database } from "@notify/db";
import {
  type AttemptThrottle,
  createAdminApp as adminApp,
  createAttemptThrottle,
  createUnverifiedReads,
  type MetricsRegistry,
  mountLiveness,
  newApp,
  type TrustedProxies,
  type UnverifiedReadLimits,
} from "@notify/http";
import type { Logger } from "@notify/log";
import { sendgridPublicKey } from "@notify/providers";
import { receiptMetrics } from "./webhooks/metrics.js";
import { mountPlivoWebhook } from "./webhooks/plivo.js";
import { mountPlivoInbound } from "./webhooks/plivo-inbound.js";
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
   * PREAUTH_RATE_PER_SECOND and PREAUTH_BURST): each post reserves an attempt before its body is
   * read and gets it back when its signature verifies; an address with none left is read only
   * through the over-budget reads.
   */
  preauthThrottle?: AttemptThrottle;
  /**
   * Bodies read at once before their signature is checked (503 beyond); of those, reads for
   * addresses out of attempts (429 beyond) and reads of one address (429 beyond); and how long
   * a body has to arrive (408 after): 32, 2, 4 and 10 s for what is not set, as
   * RECEIPTS_MAX_UNVERIFIED_READS, RECEIPTS_MAX_OVER_BUDGET_READS,
   * RECEIPTS_MAX_UNVERIFIED_READS_PER_ADDRESS and RECEIPTS_UNVERIFIED_READ_TIMEOUT_MS.
   */
  unverifiedReads?: Partial<
    Pick<UnverifiedReadLimits, "maxReads" | "maxOverBudgetReads" | "maxReadsPerAddress" | "readTimeoutMs">
  >;
  /**
   * Largest body per provider (413 beyond): SendGrid 1 MiB and Plivo 16 KiB unless set, as
   * RECEIPTS_SENDGRID_MAX_BODY_BYTES and RECEIPTS_PLIVO_MAX_BODY_BYTES.
   */
  maxBodyBytes?: { sendgrid?: number; plivo?: number };
  /** The proxies whose X-Forwarded-For names the client for the pre-auth budget (TRUSTED_PROXIES). */
  trustedProxies?: TrustedProxies;
  publicBaseUrl?: string;
  plivoAuthToken?: string;
  /**
   * The replies to an SMS opt-out (STOP) and opt-in (START) sent to a Plivo number, as
   * RECEIPTS_SMS_OPT_OUT_REPLY and RECEIPTS_SMS_OPT_IN_REPLY; empty or unset: no reply.
   */
  smsReplies?: { optOut?: string; optIn?: string };
  /** SendGrid's verification key: base64 DER or PEM. */
  sendgridPublicKey?: string;
  /** How old (and how far ahead) a SendGrid post's signed timestamp may be: 600 s and 60 s unless set. */
  timestampWindow?: TimestampWindow;
}

const DEFAULT_WINDOW: TimestampWindow = { maxAgeSeconds: 600, maxFutureSeconds: 60 };
const DEFAULT_READS = { maxReads: 32, maxOverBudgetReads: 2, maxReadsPerAddress: 4, readTimeoutMs: 10_000 };
const DEFAULT_MAX_BODY_BYTES = { sendgrid: 1_048_576, plivo: 16_384 };

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
  const app = newApp(deps.log, {
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    ...(deps.trustedProxies === undefined ? {} : { trustedProxies: deps.trustedProxies }),
  });
  mountLiveness(app);
  const counters = receiptMetrics(deps.metrics);
  // Every webhook reads its body before it can check the signature over it: those reads are
  // bounded in this process and charged to the source address before they start, and a verified
  // post gets its attempt back. An address out of attempts (a provider's shared one, when others
  // point their accounts at this URL) is still read, through a lane of its own, so its genuine
  // posts are not refused for the failures sent from it. One address holds a few reads at most,
  // each for a bounded time, so a client sending slow bodies cannot hold every read.
  const unverified = createUnverifiedReads(deps.preauthThrottle ?? createAttemptThrottle({ perSecond: 2, burst: 60 }), {
    ...DEFAULT_READS,
    ...deps.unverifiedReads,
  });
  const maxBodyBytes = { ...DEFAULT_MAX_BODY_BYTES, ...deps.maxBodyBytes };
  const publicBaseUrl = deps.publicBaseUrl === undefined ? {} : { publicBaseUrl: deps.publicBaseUrl };
  if (deps.plivoAuthToken !== undefined) {
    mountPlivoWebhook(app, {
      sql: deps.database.sql,
      database: deps.database,
      authToken: deps.plivoAuthToken,
      metrics: counters,
      unverified,
      maxBodyBytes: maxBodyBytes.plivo,
      ...publicBaseUrl,
    });
    mountPlivoInbound(app, {
      database: deps.database,
      authToken: deps.plivoAuthToken,
      metrics: counters,
      unverified,
      maxBodyBytes: maxBodyBytes.plivo,
      ...publicBaseUrl,
      ...(deps.smsReplies === undefined ? {} : { replies: deps.smsReplies }),
    });
  }
  if (deps.sendgridPublicKey !== undefined) {
    mountSendgridWebhook(app, {
      sql: deps.database.sql,
      database: deps.database,
      publicKey: sendgridPublicKey(deps.sendgridPublicKey),
      window: deps.timestampWindow ?? DEFAULT_WINDOW,
      metrics: counters,
      unverified,
      maxBodyBytes: maxBodyBytes.sendgrid,
    });
  }
  return app;
}
