import { common, criticalCategories, int, port, text, unsubscribeLinks } from "@notify/config";
import {
  DEFAULT_FAILOVER_AFTER_ATTEMPTS,
  DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS,
  parseRetrySchedule,
  type RateLimit,
} from "@notify/core";
import { channelProviderEnv, checkChannelProviders } from "@notify/providers";
import * as v from "valibot";

const RATE_ENTRY = /^([a-z0-9_-]{1,32})=(\d+(?:\.\d+)?)(?::(\d+))?$/;

/** `name=rate[:burst],...`, e.g. `sendgrid=100:200,plivo=10`; the burst defaults to one second's worth. */
const rateLimits = () =>
  v.pipe(
    v.optional(v.string(), ""),
    v.check(
      (s) => s.trim() === "" || s.split(",").every((entry) => RATE_ENTRY.test(entry.trim())),
      "must be comma-separated provider=rate[:burst] entries, e.g. sendgrid=100:200,plivo=10",
    ),
    v.transform((s) => {
      const limits: Record<string, RateLimit> = {};
      for (const entry of s.split(",").filter((e) => e.trim() !== "")) {
        const [, name, rate, burst] = RATE_ENTRY.exec(entry.trim()) as RegExpExecArray;
        const perSecond = Number(rate);
        limits[name as string] = { perSecond, burst: burst ? Number(burst) : Math.max(1, Math.ceil(perSecond)) };
      }
      return limits;
    }),
    v.check((limits) => Object.values(limits).every((l) => l.perSecond > 0 && l.burst >= 1), "rates must be > 0"),
  );

const Env = v.object({
  ...common,
  /**
   * Per channel, the real provider, its local sandbox, or off (EMAIL_PROVIDER, SMS_PROVIDER,
   * PUSH_PROVIDER and their credentials: libs/providers/src/config.ts). A channel has a pool
   * only when its provider is on; in-app always has one (the inbox is ours).
   */
  ...channelProviderEnv,
  /** Which email carries a List-Unsubscribe link, and where it points (UNSUBSCRIBE_*). */
  ...unsubscribeLinks(),
  /** The categories routing sends whatever the user's opt-outs: their email goes without the link (CRITICAL_CATEGORIES). */
  ...criticalCategories(),
  /** The workers' only server, the operator's: health, readiness, metrics and the breaker view. */
  PORT: port(3002),
  /** Its interface: loopback by default; 0.0.0.0 where probes or a scraper run elsewhere. */
  HOST: text("127.0.0.1"),
  /** Sends in flight per (channel, lane) pool in this process. */
  TRANSACTIONAL_CONCURRENCY: int(32, 1, 1024),
  /** Sends in flight per (channel, promotional lane) pool in this process. */
  PROMOTIONAL_CONCURRENCY: int(16, 1, 1024),
  /** Provider attempts before a transient failure is dead-lettered. */
  MAX_ATTEMPTS: int(5, 1, 50),
  /**
   * With EMAIL_FAILOVER_PROVIDER on: the attempts of one email the first provider gets before
   * the next ones go to the failover provider (whose breaker being open, or whose rate being
   * spent, sends the email there at once).
   */
  FAILOVER_AFTER_ATTEMPTS: int(DEFAULT_FAILOVER_AFTER_ATTEMPTS, 1, 50),
  /** Backoff base and cap for transient failures (exponential, equal jitter: at least half the ceiling). */
  RETRY_BASE_MS: int(1000, 10, 600_000),
  /** Longest wait between two attempts of a transient failure. */
  RETRY_MAX_MS: int(300_000, 100, 3_600_000),
  /**
   * A provider call unanswered after this long is abandoned. Its outcome is unknown (the
   * provider may have accepted), so the channel becomes unsettled and is never resent; keep it
   * well above the providers' normal latency.
   */
  PROVIDER_TIMEOUT_MS: int(10_000, 100, 120_000),
  /** Webhook attempts handled at once by this process, all endpoints together (posts and their waits). */
  WEBHOOK_CONCURRENCY: int(256, 1, 4096),
  /**
   * Posts in flight in this process to one endpoint; a few more wait in line, the rest are put
   * back for a second: a slow endpoint never holds more of the senders.
   */
  WEBHOOK_ENDPOINT_CONCURRENCY: int(8, 1, 256),
  /** A post to a webhook endpoint unanswered after this long is a failed attempt, retried. */
  WEBHOOK_TIMEOUT_MS: int(10_000, 100, 60_000),
  /**
   * Seconds to wait after each failed attempt before the next (comma-separated); once every
   * entry is spent the delivery is dead. About three days by default.
   */
  WEBHOOK_RETRY_SCHEDULE: v.pipe(
    v.optional(v.string(), DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS.join(",")),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parseRetrySchedule(dataset.value);
      } catch (error) {
        addIssue({ message: (error as Error).message });
        return NEVER;
      }
    }),
  ),
  /** An endpoint that failed every attempt for this many hours is disabled (its client is told). */
  WEBHOOK_DISABLE_AFTER_HOURS: v.pipe(
    v.optional(v.string(), "120"),
    v.transform(Number),
    v.number("must be a number"),
    v.minValue(0.0001),
  ),
  /**
   * production, or development: webhook endpoints may then be plain http on loopback and
   * private hosts (the local receiver). `npm start` sets development; never set it on a server.
   */
  NOTIFY_PROFILE: v.optional(
    v.picklist(["production", "development"], "must be production or development"),
    "production",
  ),
  /**
   * Contractual send rate per provider, shared by every worker process (token buckets in NATS
   * KV). Providers not listed get PROVIDER_RATE_DEFAULT per second.
   */
  PROVIDER_RATE_LIMITS: rateLimits(),
  /** Send rate per second of a provider PROVIDER_RATE_LIMITS does not list. */
  PROVIDER_RATE_DEFAULT: int(100, 1, 1_000_000),
  /** Share of each provider's rate (and burst) that only transactional traffic may use. */
  TRANSACTIONAL_RESERVED_PERCENT: int(20, 0, 90),
  /**
   * Circuit breaker per provider: once BREAKER_MIN_CALLS calls were made, it opens when
   * BREAKER_FAILURE_PERCENT or more of the last BREAKER_WINDOW_CALLS calls (or of the last
   * BREAKER_MIN_CALLS, when that is more) failed (transient or unanswered), or as large a share
   * was slower than BREAKER_SLOW_CALL_MS (each share on its own). Work is then parked for
   * BREAKER_OPEN_MS; then BREAKER_HALF_OPEN_PROBES calls probe the provider, and the breaker
   * closes unless as large a share of them failed (or was slow), when it opens again.
   */
  BREAKER_WINDOW_CALLS: int(50, 1, 1000),
  /** Calls a breaker sees before it may open. */
  BREAKER_MIN_CALLS: int(10, 1, 10_000),
  /** Share (percent) of failed calls, or of slow ones, in the window that opens a breaker; 100: all of them. */
  BREAKER_FAILURE_PERCENT: int(50, 1, 100),
  /** A call slower than this counts against the provider, as a failure does. */
  BREAKER_SLOW_CALL_MS: int(5000, 10, 120_000),
  /** How long an open breaker parks work before it probes the provider. */
  BREAKER_OPEN_MS: int(30_000, 100, 3_600_000),
  /** Calls that probe a provider after the open period: the breaker closes unless BREAKER_FAILURE_PERCENT or more of them failed (or were slow). */
  BREAKER_HALF_OPEN_PROBES: int(3, 1, 100),
  /**
   * Bearer token for /admin/* on this port (at least 32 characters; compared in constant time).
   * Unset: the admin routes answer 404.
   */
  WORKERS_ADMIN_TOKEN: v.optional(v.pipe(v.string(), v.minLength(32, "must be at least 32 characters"))),
  /**
   * How often this process writes its providers' state (breakers, rates, sends waiting for a
   * token) to the NATS KV bucket notify_workers, for GET /api/v1/ops/providers. The bucket keeps a
   * report 30 s: keep this well below that, or a live process looks gone between two reports.
   */
  WORKER_REPORT_INTERVAL_MS: int(2000, 100, 10_000),
  /** Postgres pool of the promotional pools. */
  DB_POOL_SIZE: int(10, 1, 100),
  /** Postgres pool of the transactional pools alone, so a promotional flood cannot take it. */
  TRANSACTIONAL_DB_POOL_SIZE: int(5, 1, 100),
});

export const WorkersConfig = v.pipe(Env, checkChannelProviders<v.InferOutput<typeof Env>>());
export type WorkersConfig = v.InferOutput<typeof WorkersConfig>;
