import type { BucketLimits } from "@notify/core";

/** The in-app inbox's limits and timers (INBOX_* in config.ts); tests change the ones they exercise. */
export interface InboxSettings {
  /** Leaky bucket of each token over every inbox route (INBOX_TOKEN_RATE_*). */
  tokenRate: BucketLimits;
  /** Leaky bucket of each user of a client, over all of the user's tokens (INBOX_USER_RATE_*). */
  userRate: BucketLimits;
  /** Streams open at once per token, per user of a client (429 beyond), and per process (503 beyond). */
  streamsPerToken: number;
  streamsPerUser: number;
  streamsPerProcess: number;
  /** How often the process's one poller looks for items a lost LISTEN did not announce (INBOX_POLL_MS). */
  pollMs: number;
  /** How often an idle stream writes a comment, so proxies keep it open (INBOX_KEEPALIVE_SECONDS). */
  keepAliveMs: number;
  /**
   * How often open streams' tokens are checked again (expiry, the minting key); a revocation
   * heard ends its streams at once.
   */
  recheckMs: number;
}

export const DEFAULT_INBOX_SETTINGS: InboxSettings = {
  tokenRate: { perSecond: 10, burst: 50 },
  userRate: { perSecond: 20, burst: 100 },
  streamsPerToken: 4,
  streamsPerUser: 8,
  streamsPerProcess: 10_000,
  pollMs: 5000,
  keepAliveMs: 15_000,
  recheckMs: 1000,
};

/** Seconds a 429 or 503 for a stream cap asks a client to wait before it opens another. */
export const STREAM_CAP_RETRY_SECONDS = 5;

/** The longest lifetime of an inbox token (ttl_seconds at most): a revocation is kept this long. */
export const MAX_TOKEN_LIFETIME_SECONDS = 86_400;
