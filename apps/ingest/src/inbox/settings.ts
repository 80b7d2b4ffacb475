import type { BucketLimits } from "@notify/core";

/** The in-app inbox's limits and timers (INBOX_* in config.ts); tests change the ones they exercise. */
export interface InboxSettings {
  /** Leaky bucket of each token over every inbox route (INBOX_TOKEN_RATE_*). */
  tokenRate: BucketLimits;
  /** Leaky bucket of each user of a client, over all of the user's tokens (INBOX_USER_RATE_*). */
  userRate: BucketLimits;
  /**
   * Streams open at once per token, per user of a client and per client (429 beyond), and per
   * process (503 beyond). Unset, `streamsPerClient` is a quarter of `streamsPerProcess`
   * (`streamsPerClientOf`).
   */
  streamsPerToken: number;
  streamsPerUser: number;
  streamsPerClient?: number | undefined;
  streamsPerProcess: number;
  /**
   * Revocations one client may hold in force (INBOX_REVOCATIONS_PER_CLIENT; 429 beyond): every
   * instance holds each in memory until the tokens it covers have expired.
   */
  revocationsPerClient: number;
  /** How often the process's one poller looks for items a lost LISTEN did not announce (INBOX_POLL_MS). */
  pollMs: number;
  /** How often an idle stream writes a comment, so proxies keep it open (INBOX_KEEPALIVE_SECONDS). */
  keepAliveMs: number;
  /**
   * How often open streams' tokens are checked again (expiry, the minting key); a revocation
   * heard ends its streams at once.
   */
  recheckMs: number;
  /**
   * The origins whose pages may call the inbox routes from a browser (INBOX_CORS_ORIGINS): `*`
   * for any, or a list. The token travels in a header, never a cookie, so no answer allows
   * credentials, and a page can only use a token its own backend handed it.
   */
  corsOrigins: "*" | readonly string[];
}

export const DEFAULT_INBOX_SETTINGS: InboxSettings = {
  tokenRate: { perSecond: 10, burst: 50 },
  userRate: { perSecond: 20, burst: 100 },
  streamsPerToken: 4,
  streamsPerUser: 8,
  streamsPerProcess: 10_000,
  revocationsPerClient: 100_000,
  pollMs: 5000,
  keepAliveMs: 15_000,
  recheckMs: 1000,
  corsOrigins: "*",
};

/** Seconds a 429 or 503 for a stream cap asks a client to wait before it opens another. */
export const STREAM_CAP_RETRY_SECONDS = 5;

/**
 * The longest lifetime of an inbox token (ttl_seconds at most): a revocation of one token is kept
 * this long after the token's issue, one of all a user's tokens this long after it is made.
 */
export const MAX_TOKEN_LIFETIME_SECONDS = 86_400;

/** A client's share of the process's streams: as set, or a quarter of the process's cap. */
export const streamsPerClientOf = (settings: Pick<InboxSettings, "streamsPerClient" | "streamsPerProcess">): number =>
  settings.streamsPerClient ?? Math.max(1, Math.floor(settings.streamsPerProcess / 4));

/**
 * How far apart ingest instances' clocks may be (they run NTP, which keeps them far closer): a
 * token id issued up to this far in the revoking instance's future, or this much longer ago than
 * the longest lifetime, may still name a token another instance takes.
 */
export const CLOCK_TOLERANCE_SECONDS = 60;

/**
 * Seconds a 429 for a client's revocation cap asks it to wait: its revocations end as their
 * tokens expire, and ingest's purge gives the rows back about once a minute.
 */
export const REVOCATION_CAP_RETRY_SECONDS = 60;
