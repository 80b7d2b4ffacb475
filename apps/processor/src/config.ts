import { archive, categoryList, common, criticalCategories, int, port, text } from "@notify/config";
import * as v from "valibot";

export const ProcessorConfig = v.object({
  ...common,
  /** The processor's only server, the operator's: health, readiness and metrics. */
  PORT: port(3001),
  /** Its interface: loopback by default; 0.0.0.0 where probes or a scraper run elsewhere. */
  HOST: text("127.0.0.1"),
  /**
   * This instance among the processors sharing the lane partitions (notify_leases). Keep it the
   * same across restarts of one instance, so a restart takes its own partitions back at once;
   * never give two running instances the same one. Default: host name and PORT.
   */
  INSTANCE_ID: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1-64 of A-Z, a-z, 0-9, _, -"))),
  /**
   * Seconds an instance may be silent before its partitions and the periodic jobs move to
   * another one. At least the lane consumers' ack wait (8 s), so what it held is delivered again
   * before anything newer; the instance itself stops consuming after half of it without a beat.
   */
  LEASE_TTL_SECONDS: int(10, 9, 300),
  /** Lane messages handled at once per lane partition; one user's stay in order regardless. */
  PARTITION_CONCURRENCY: int(16, 1, 1024),
  /** Categories no preference can suppress (CRITICAL_CATEGORIES, shared with the workers). */
  ...criticalCategories(),
  /**
   * Promotional categories that are dropped (suppressed, reason quiet_hours) instead of
   * deferred when they arrive inside the user's quiet hours: offers worthless by morning.
   */
  QUIET_HOURS_DROP_CATEGORIES: categoryList(""),
  /** How often the scheduler looks for deferred notifications that are due. */
  DEFERRED_POLL_INTERVAL_MS: int(1000, 50, 60_000),
  /** How often channel fallback chains are looked at: the latest a fallback is taken after its condition holds. */
  FALLBACK_POLL_INTERVAL_MS: int(1000, 50, 60_000),
  /**
   * How often the webhook dispatcher looks for deliveries due (a first attempt or a retry) and
   * notifications completed: the most an event waits before its first post.
   */
  WEBHOOK_POLL_INTERVAL_MS: int(1000, 50, 60_000),
  /**
   * Attempts of one webhook endpoint published and not yet answered, at most: the rest of its
   * backlog waits in Postgres. Keep it at or above the workers' WEBHOOK_ENDPOINT_CONCURRENCY
   * times the workers' processes, so a fast endpoint is never kept waiting.
   */
  WEBHOOK_ENDPOINT_IN_FLIGHT: int(32, 1, 4096),
  /** How often the broadcast expander looks for broadcasts to expand when it has none. */
  BROADCAST_POLL_INTERVAL_MS: int(1000, 50, 60_000),
  /**
   * Recipients per expansion transaction: one unnest insert, then their lane publishes while the
   * next batch is written. A pause or cancel takes effect between batches.
   */
  BROADCAST_BATCH_SIZE: int(2000, 1, 20_000),
  /** Days a notification stays in the live log before it is archived (90 days, then archive). */
  RETENTION_DAYS: int(90, 1, 36_500),
  /** How often the retention job looks for notifications past the window. */
  RETENTION_INTERVAL_MS: int(3_600_000, 1000, 86_400_000),
  /**
   * Hours of notifications per partition of the log (24: a partition a day, UTC). The retention job
   * keeps a week of partitions made ahead and retires a partition once all of it is past
   * RETENTION_DAYS; a change applies to the partitions made after it.
   */
  LOG_PARTITION_HOURS: int(24, 1, 744),
  /** Where archived notifications go: ARCHIVE_URL (a folder or s3://), else ARCHIVE_DIR. */
  ...archive(),
  /** How often the reconciler looks for stalled work (one instance at a time runs it). */
  RECONCILE_INTERVAL_MS: int(10_000, 1000, 3_600_000),
  /** Seconds work may sit unchanged, with nothing left in NATS to move it on, before the reconciler drives it on. */
  RECONCILE_AFTER_SECONDS: int(20, 5, 86_400),
  /** Hours of notifications the reconciler's first scan covers (later scans go on from where the last stopped). */
  RECONCILE_LOOKBACK_HOURS: int(24, 1, 2160),
  /**
   * How long routing may use a user's preferences and contacts after reading them: a change
   * reaches routing within this. 0 reads them for every notification.
   */
  PREFERENCE_CACHE_TTL_MS: int(5000, 0, 60_000),
  /** Postgres pool of the promotional lane and the scheduler. */
  DB_POOL_SIZE: int(10, 1, 100),
  /** Postgres pool of the transactional lane alone, so a promotional flood cannot take it. */
  TRANSACTIONAL_DB_POOL_SIZE: int(5, 1, 100),
});
export type ProcessorConfig = v.InferOutput<typeof ProcessorConfig>;
