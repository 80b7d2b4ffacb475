import type { Bus } from "@notify/bus";
import type { MaybePromise } from "@notify/core";
import type { Database } from "@notify/db";
import type { AttemptThrottle, MetricsRegistry, TrustedProxies, VersionLifecycle } from "@notify/http";
import type { Logger } from "@notify/log";
import type { CachedKeyLookup } from "./auth/api-keys.js";
import type { RateLimiter } from "./auth/rate-limit.js";
import type { InboxRevocations } from "./inbox/revocations.js";
import type { InboxSettings } from "./inbox/settings.js";
import type { Ingestor } from "./notifications/create.js";
import type { TemplateInfo, TemplateLookup } from "./notifications/templates.js";

/** Everything the ingest routes need, built once in main.ts (tests build their own). */
export interface IngestDeps {
  /** Where the request-duration histogram goes; none in most tests. */
  metrics?: MetricsRegistry;
  database: Database;
  bus: Bus;
  log: Logger;
  /** `forget` drops a key this instance changed (others hear it on NATS); `active` serves inbox tokens. */
  lookupKey: CachedKeyLookup;
  /** Latest template parameters; with a cache, `forget` drops a template that got a version. */
  templates: ((id: string) => MaybePromise<TemplateInfo | null>) & Partial<Pick<TemplateLookup, "forget">>;
  /** Accepts notifications with group commit (notifications/create.ts). */
  ingestor: Ingestor;
  maxBodyBytes: number;
  /** HMAC key of list cursors (CURSOR_SECRET). */
  cursorSecret: string;
  /** Inbound leaky buckets per key (default: 1000/s with a queue of 2000). */
  rateLimiter?: RateLimiter;
  /**
   * Failed-authentication budget per source address, before any key or token lookup
   * (default: 2 per second with a burst of 60, as PREAUTH_RATE_PER_SECOND and PREAUTH_BURST).
   */
  preauthThrottle?: AttemptThrottle;
  /** The proxies whose X-Forwarded-For names the client for the pre-auth budget (TRUSTED_PROXIES). */
  trustedProxies?: TrustedProxies;
  /** Push subscriptions may point at loopback and private hosts (NOTIFY_PROFILE=development). */
  allowPrivatePushEndpoints?: boolean;
  /** Webhook endpoints may be plain http on loopback and private hosts (NOTIFY_PROFILE=development). */
  webhookAllowPrivateNetworks?: boolean;
  /** Deprecation lifecycle of /api/v1 (default: current, no headers). */
  lifecycle?: VersionLifecycle;
  /** How long a dead-letter replay waits for the processor that runs it (default 30 s). */
  replayTimeoutMs?: number;
  /** How long the dead-letter list and show wait for the processor that reads them (default 30 s). */
  deadLetterTimeoutMs?: number;
  /** How long a notification's cancel waits for the processor that runs it (default 10 s). */
  cancelTimeoutMs?: number;
  /**
   * The inbox's own small pool (INBOX_DB_POOL_SIZE): its lists, updates and streams never take
   * the accept path's connections. `database` when absent (tests).
   */
  inboxDatabase?: Database;
  /** The inbox token revocations held in memory, kept current from NATS (start.ts); read from the inbox pool when absent. */
  inboxRevocations?: InboxRevocations;
  /** The inbox's rate limits, stream caps, timers and CORS origins (default: DEFAULT_INBOX_SETTINGS). */
  inbox?: Partial<InboxSettings>;
  /**
   * The categories no preference suppresses (CRITICAL_CATEGORIES, the processor's): the inbox's
   * preference centre shows them locked and refuses an opt-out of them. None when absent.
   */
  criticalCategories?: readonly string[];
  isStopping: () => boolean;
}
