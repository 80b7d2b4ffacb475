import {
  adminServer,
  bool,
  common,
  criticalCategories,
  httpServer,
  int,
  optionalInt,
  port,
  preauthThrottle,
  text,
} from "@notify/config";
import { parseRfc3339 } from "@notify/core";
import * as v from "valibot";

// A day the calendar lacks (2027-02-30) is refused, not read as one of the next month.
const optionalDate = () =>
  v.optional(
    v.pipe(
      v.string(),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        const date = parseRfc3339(dataset.value);
        if (date !== null) return date;
        addIssue({ message: "must be an RFC 3339 timestamp, e.g. 2027-06-01T00:00:00Z" });
        return NEVER;
      }),
    ),
  );

/** An origin exactly as a browser's Origin header names it: scheme, host and port, nothing else. */
const isOrigin = (value: string): boolean => {
  try {
    const url = new URL(value);
    return (url.protocol === "https:" || url.protocol === "http:") && url.origin === value;
  } catch {
    return false;
  }
};

export const IngestConfig = v.pipe(
  v.object({
    ...common,
    /** HTTP port of the public API. */
    PORT: port(3000),
    /** Interface to bind; 0.0.0.0 in containers. */
    HOST: text("0.0.0.0"),
    ...adminServer(3100),
    ...httpServer(),
    ...preauthThrottle(),
    /** Largest accepted request body in bytes (413 beyond). */
    MAX_BODY_BYTES: int(262_144, 1024, 10_485_760),
    /** How long an API key lookup is cached. Revocations are announced on NATS and take effect at once; this bounds one an instance missed. */
    AUTH_CACHE_TTL_SECONDS: int(5, 0, 60),
    /** How long a publish may wait for JetStream's ack before POST answers 503. */
    PUBLISH_TIMEOUT_MS: int(3000, 100, 30_000),
    /** Recovery sweep: rows committed but never published, older than the grace, are republished. */
    RECOVERY_INTERVAL_MS: int(2000, 100, 600_000),
    /** How old an unpublished row must be before the sweep republishes it (a batch in flight is not touched). */
    RECOVERY_GRACE_MS: int(5000, 0, 600_000),
    /** Inbound leaky bucket per API key when the key sets none: outflow rate and queue size. */
    RATE_LIMIT_PER_SECOND: int(1000, 1, 1_000_000),
    /** Queue size of that bucket: requests beyond it wait no longer and get 429. */
    RATE_LIMIT_BURST: int(2000, 1, 10_000_000),
    /** Deprecation lifecycle of /api/v1 (RFC 3339 dates); unset while v1 is current. */
    API_V1_DEPRECATED_AT: optionalDate(),
    /** When /api/v1 stops answering (410 after it), announced with the Sunset header; unset while none is planned. */
    API_V1_SUNSET_AT: optionalDate(),
    /** Migration guide announced with rel="deprecation". */
    API_V1_DEPRECATION_LINK: v.optional(v.pipe(v.string(), v.url("must be a URL"))),
    /**
     * Key of the HMAC that makes list cursors tamper-evident. Required, never generated: a cursor
     * must survive a restart and work on every replica, so all of them share this one value.
     */
    CURSOR_SECRET: v.pipe(
      v.string(),
      v.minLength(32, "must be at least 32 characters, the same on every ingest process (openssl rand -base64 32)"),
    ),
    /**
     * Requests waiting for a group commit at most: beyond it POST /notifications answers 503 with
     * Retry-After at once and stores nothing, instead of queueing without bound while Postgres is slow.
     */
    INGEST_QUEUE_LIMIT: int(10_000, 1, 1_000_000),
    /**
     * production, or development: push subscriptions and webhook endpoints may then point at
     * loopback and private hosts (the local sandboxes), webhook endpoints over plain http too.
     * `npm start` sets development; never set it on a server.
     */
    NOTIFY_PROFILE: v.optional(
      v.picklist(["production", "development"], "must be production or development"),
      "production",
    ),
    /** Postgres pool size of this process. */
    DB_POOL_SIZE: int(10, 1, 100),
    /**
     * Postgres pool of the in-app inbox alone (its lists, updates and streams), so that users'
     * clients can never take the connections POST /notifications commits with.
     */
    INBOX_DB_POOL_SIZE: int(3, 1, 50),
    /**
     * Leaky bucket of each inbox token over every /inbox route (429 beyond its queue): one user's
     * client, or a script holding its token, cannot keep the inbox's pool busy for everyone else.
     */
    INBOX_TOKEN_RATE_PER_SECOND: int(10, 1, 10_000),
    /** Queue size of that bucket: a client marking many items read at once waits instead of being refused. */
    INBOX_TOKEN_RATE_BURST: int(50, 1, 100_000),
    /** Leaky bucket of each user of a client over all their tokens: minting more tokens does not raise a user's share. */
    INBOX_USER_RATE_PER_SECOND: int(20, 1, 10_000),
    /** Queue size of the per-user bucket. */
    INBOX_USER_RATE_BURST: int(100, 1, 100_000),
    /** Inbox streams open at once per token (429 beyond): a few tabs, not a loop that never closes what it opens. */
    INBOX_STREAMS_PER_TOKEN: int(4, 1, 1000),
    /** Inbox streams open at once per user of a client (429 beyond), over all their tokens and devices. */
    INBOX_STREAMS_PER_USER: int(8, 1, 10_000),
    /**
     * Inbox streams this process holds at once (503 beyond, so the load balancer's next instance
     * takes them): each holds a socket and memory until its client leaves.
     */
    INBOX_STREAMS_MAX: int(10_000, 1, 1_000_000),
    /**
     * Inbox streams this process holds at once for the users of one client (429 beyond): one
     * client's key can mint tokens for any number of user ids, and without this their streams
     * could fill INBOX_STREAMS_MAX and turn every other client's users away. Unset: a quarter of
     * INBOX_STREAMS_MAX.
     */
    INBOX_STREAMS_PER_CLIENT: optionalInt(1, 1_000_000),
    /**
     * How often one poller per process looks for inbox items a lost LISTEN connection did not
     * announce (one statement for all open streams); NOTIFY wakes streams at once otherwise.
     */
    INBOX_POLL_MS: int(5000, 100, 600_000),
    /** How often an idle inbox stream writes a comment line, so that proxies do not close it as idle. */
    INBOX_KEEPALIVE_SECONDS: int(15, 1, 300),
    /**
     * How often each instance reads the inbox token revocations made since its last read.
     * Revocations are announced on NATS and take effect at once; this bounds one an instance missed.
     */
    INBOX_REVOCATION_REFRESH_SECONDS: int(30, 1, 3600),
    /**
     * Inbox token revocations one client may hold in force (429 beyond): one per token it revoked,
     * until that token's latest expiry, and one per user it revoked all of, a day from the latest.
     * Every ingest instance holds each in memory (a few hundred bytes; 256-character user ids
     * included, at most about 50 MB for a client at the default), so this bounds that memory by
     * clients times this, whatever a client's key sends.
     */
    INBOX_REVOCATIONS_PER_CLIENT: int(100_000, 1, 10_000_000),
    /**
     * The origins whose pages may call the /api/v1/inbox routes from a browser (CORS), comma-separated
     * as browsers send them (https://app.example.com, no path), or * for any. Credentials are never
     * allowed: the inbox token travels in the X-Inbox-Token header, never in a cookie, so a page can
     * only call with a token its own backend minted. No other route answers CORS.
     */
    INBOX_CORS_ORIGINS: v.pipe(
      v.optional(v.string(), "*"),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        if (dataset.value.trim() === "*") return "*" as const;
        const origins = dataset.value
          .split(",")
          .map((o) => o.trim())
          .filter((o) => o !== "");
        const bad = origins.filter((o) => !isOrigin(o));
        if (origins.length > 0 && bad.length === 0) return origins;
        addIssue({
          message:
            origins.length === 0
              ? "must be * or comma-separated origins, e.g. https://app.example.com"
              : `${bad.map((o) => `"${o}"`).join(", ")}: not an origin as browsers send it (http(s)://host[:port], lowercase, no path), nor *`,
        });
        return NEVER;
      }),
    ),
    // The inbox's preference centre shows them locked (the processor's list).
    ...criticalCategories(),
    /**
     * The operator console at /console on the operator's port (ADMIN_HOST:ADMIN_PORT): sign in
     * with an operator key; it acts only through the public API. Served only when ADMIN_HOST is
     * a loopback address or CONSOLE_TLS is true (else off, with a warning at start). false:
     * /console answers 404.
     */
    CONSOLE_ENABLED: bool(true),
    /**
     * Browsers reach the console over https, through a TLS proxy in front of the operator's port.
     * Its sign-in form carries an operator key and its cookie a session, which must not cross a
     * network in the clear: on a non-loopback ADMIN_HOST the console is served only with this
     * set, and the session cookie is then Secure, with the __Host- prefix (Path=/, no Domain).
     */
    CONSOLE_TLS: bool(false),
    /**
     * Link from a notification's trace id to a trace viewer: a URL with {trace_id} in it, e.g.
     * http://localhost:16686/trace/{trace_id} (Jaeger). Unset: the trace id is shown as text.
     */
    CONSOLE_TRACE_URL: v.optional(
      v.pipe(
        v.string(),
        v.url("must be a URL"),
        v.regex(/^https?:\/\//i, "must be an http(s) URL"),
        v.includes("{trace_id}", "must contain {trace_id}, replaced by the trace id"),
      ),
    ),
  }),
  v.check(
    (c) => !c.API_V1_DEPRECATED_AT || !c.API_V1_SUNSET_AT || c.API_V1_SUNSET_AT >= c.API_V1_DEPRECATED_AT,
    "API_V1_SUNSET_AT must not be earlier than API_V1_DEPRECATED_AT (RFC 8594)",
  ),
);
export type IngestConfig = v.InferOutput<typeof IngestConfig>;
