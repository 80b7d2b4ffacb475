import { isIP } from "node:net";
import * as v from "valibot";
import { parseArchiveUrl } from "./archive.js";

export {
  type ArchiveLocation,
  type ArchiveTarget,
  ArchiveUrlError,
  archiveTarget,
  formatArchiveLocation,
  parseArchiveUrl,
} from "./archive.js";

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|_URL$|_ENDPOINT$/i;

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

/**
 * Validates an environment against a valibot schema and returns the typed config, or throws a
 * ConfigError listing every problem at once (not just the first), so an operator fixes a
 * deployment in one go.
 */
export function parseConfig<S extends v.GenericSchema>(
  schema: S,
  env: Record<string, string | undefined>,
): v.InferOutput<S> {
  const result = v.safeParse(schema, env, { abortEarly: false });
  if (result.success) return result.output;
  const problems = result.issues.map((issue) => {
    const key = v.getDotPath(issue) ?? "(root)";
    if (issue.input === undefined) {
      // A schema may say why and how to set it ("is required: ..."); valibot's own words say neither.
      return `${key}: ${issue.message.startsWith("is required") ? issue.message : "is required"} (got unset)`;
    }
    // A secret, or a URL that may carry a password, is never echoed back.
    const shown = SECRET_NAME.test(key) ? "[redacted]" : JSON.stringify(issue.input);
    return `${key}: ${issue.message} (got ${shown})`;
  });
  throw new ConfigError(problems);
}

/** Like parseConfig, but prints the problems and exits with status 78 (EX_CONFIG). */
export function loadConfig<S extends v.GenericSchema>(
  schema: S,
  env: Record<string, string | undefined>,
): v.InferOutput<S> {
  try {
    return parseConfig(schema, env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
}

// Reusable env field schemas: env values are strings, these turn them into typed values.

export const port = (fallback: number) =>
  v.pipe(
    v.optional(v.string(), String(fallback)),
    v.regex(/^\d+$/, "must be a port number"),
    v.transform(Number),
    v.number(),
    v.minValue(0, "must be 0-65535"),
    v.maxValue(65535, "must be 0-65535"),
  );

export const int = (fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  v.pipe(
    v.optional(v.string(), String(fallback)),
    v.regex(/^-?\d+$/, "must be an integer"),
    v.transform(Number),
    v.number(),
    v.minValue(min, `must be >= ${min}`),
    v.maxValue(max, `must be <= ${max}`),
  );

/** An integer that may be left unset (undefined): the default then comes from elsewhere. */
export const optionalInt = (min = 0, max = Number.MAX_SAFE_INTEGER) =>
  v.optional(
    v.pipe(
      v.string(),
      v.regex(/^-?\d+$/, "must be an integer"),
      v.transform(Number),
      v.number(),
      v.minValue(min, `must be >= ${min}`),
      v.maxValue(max, `must be <= ${max}`),
    ),
  );

export const url = (fallback?: string) =>
  fallback === undefined
    ? v.pipe(v.string("is required"), v.url("must be a URL"))
    : v.pipe(v.optional(v.string(), fallback), v.url("must be a URL"));

export const optionalUrl = () => v.optional(v.pipe(v.string(), v.url("must be a URL")));

export const logLevel = () =>
  v.optional(
    v.picklist(["fatal", "error", "warn", "info", "debug", "trace", "silent"], "must be a pino level"),
    "info",
  );

export const bool = (fallback: boolean) =>
  v.pipe(
    v.optional(v.picklist(["true", "false", "1", "0"], "must be true or false"), fallback ? "true" : "false"),
    v.transform((value) => value === "true" || value === "1"),
  );

export const text = (fallback: string) => v.optional(v.string(), fallback);

/**
 * The operator's server of an app with a public port: health, readiness and metrics answer
 * there, never on the public API's port, and it listens on loopback unless told otherwise.
 */
export const adminServer = (fallbackPort: number) => ({
  /** Port of the operator's server: /healthz, /readyz and /metrics, apart from the public API. */
  ADMIN_PORT: port(fallbackPort),
  /** Interface of the operator's server: loopback by default; 0.0.0.0 where probes or a scraper run elsewhere. */
  ADMIN_HOST: text("127.0.0.1"),
});

/**
 * The public server's limits on slow clients (slowloris): a connection that has not sent its
 * whole request head, or its whole request, in time is closed; an idle keep-alive connection too.
 */
export const httpServer = () => ({
  /** Time a client has to send the request line and headers; the connection is closed after it. */
  HTTP_HEADERS_TIMEOUT_MS: int(10_000, 1000, 600_000),
  /** Time a client has to send its whole request, body included (a streamed answer, e.g. SSE, is not bound by it). */
  HTTP_REQUEST_TIMEOUT_MS: int(30_000, 1000, 3_600_000),
  /** How long an idle keep-alive connection stays open; above a load balancer's own idle timeout when one is in front. */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(5000, 1000, 600_000),
});

/**
 * Per source address, before authentication: failed credentials (unknown API keys, bad
 * webhook signatures) spend a token bucket, and an address with none left is answered 429
 * without a lookup. Valid credentials cost nothing.
 */
export const preauthThrottle = () => ({
  /** Failed authentication attempts an address regains per second. */
  PREAUTH_RATE_PER_SECOND: int(2, 1, 100_000),
  /** Failed attempts an address may make in a row before it is answered 429. */
  PREAUTH_BURST: int(60, 1, 1_000_000),
  /**
   * The proxies in front of this app (load balancer, ingress), comma-separated addresses or CIDR
   * ranges, e.g. 10.0.0.0/8,fd00::/8: a request from one of them is counted against the address
   * its X-Forwarded-For names (the rightmost one not itself a listed proxy). Unset: the socket's
   * address, and X-Forwarded-For is ignored (any client can send it).
   */
  TRUSTED_PROXIES: v.optional(
    v.pipe(
      v.string(),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        const entries: ProxyRange[] = [];
        for (const entry of dataset.value
          .split(",")
          .map((e) => e.trim())
          .filter((e) => e !== "")) {
          const range = proxyRange(entry);
          if (range === null) addIssue({ message: `"${entry}" is not an IP address or a CIDR range` });
          else entries.push(range);
        }
        return entries.length === dataset.value.split(",").filter((e) => e.trim() !== "").length ? entries : NEVER;
      }),
    ),
    "",
  ),
});

/** One trusted proxy entry: an address, or a network with its prefix length. */
export interface ProxyRange {
  address: string;
  prefix?: number;
  family: 4 | 6;
}

function proxyRange(entry: string): ProxyRange | null {
  const [address = "", bits, extra] = entry.split("/");
  const ip = isIP(address);
  if (ip === 0 || extra !== undefined) return null;
  const family = ip === 4 ? 4 : 6;
  if (bits === undefined) return { address, family };
  const prefix = Number(bits);
  if (!/^\d{1,3}$/.test(bits) || prefix > (family === 4 ? 32 : 128)) return null;
  return { address, prefix, family };
}

/** A URL, or unset; empty counts as unset (compose passes `${VAR:-}` through as ""). */
const optionalUrlOrEmpty = () => v.optional(v.union([v.literal(""), v.pipe(v.string(), v.url("must be a URL"))]));

/**
 * OpenTelemetry tracing (libs/telemetry), by the standard OTEL_* names so an operator's usual
 * settings work. Unset endpoint: tracing is off and costs nothing. The SDK also reads the other
 * standard variables itself (OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_SCHEDULE_DELAY, ...).
 */
export const telemetry = () => ({
  /** OTLP/HTTP base URL of a trace collector (an OpenTelemetry collector, Jaeger, Tempo), e.g. http://127.0.0.1:4318; spans go to <url>/v1/traces as JSON. Unset: tracing off. */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrlOrEmpty(),
  /** Full OTLP/HTTP traces URL, over OTEL_EXPORTER_OTLP_ENDPOINT (used as is, no /v1/traces appended). */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalUrlOrEmpty(),
  /** The service.name on this app's spans. Unset: notify-<app> (notify-ingest, notify-processor, notify-workers, notify-receipts). */
  OTEL_SERVICE_NAME: v.optional(v.pipe(v.string(), v.minLength(1, "must not be empty"))),
  /** true: no tracing even with an endpoint set. */
  OTEL_SDK_DISABLED: bool(false),
});

/** Unset or empty (compose passes `${VAR:-}` through as ""), else one of the forms parseArchiveUrl reads. */
const archiveUrl = () =>
  v.optional(
    v.pipe(
      v.string(),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        if (dataset.value === "") return undefined;
        try {
          return parseArchiveUrl(dataset.value);
        } catch (error) {
          addIssue({ message: (error as Error).message });
          return NEVER;
        }
      }),
    ),
  );

/**
 * Where retention writes its archive and where `notify retention restore` reads it. ARCHIVE_URL,
 * when set, is used over ARCHIVE_DIR.
 */
export const archive = () => ({
  /** Where archived notifications go: a folder (a path or file:///path) or s3://bucket/prefix on any S3-compatible store (AWS S3, MinIO, R2, ...), the objects under <prefix>/YYYY/MM/DD/ by their created_at day, each data object (gzipped NDJSON) with its manifest. Over ARCHIVE_DIR when set. Credentials: the AWS SDK's chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a role), never in the URL. */
  ARCHIVE_URL: archiveUrl(),
  /** The archive folder when ARCHIVE_URL is unset (a volume in containers): ARCHIVE_DIR/YYYY/MM/DD/*.ndjson.gz and their manifests. */
  ARCHIVE_DIR: text("archive"),
  /** Endpoint of an S3-compatible store other than AWS (MinIO, R2, Ceph, ...), e.g. http://minio:9000; requests then use path-style addressing (<endpoint>/<bucket>/<key>). Unset: AWS S3 in ARCHIVE_S3_REGION. */
  ARCHIVE_S3_ENDPOINT: v.optional(
    v.union([
      v.literal(""),
      v.pipe(
        v.string(),
        v.url("must be a URL"),
        v.regex(/^https?:\/\/[^/@]+\/?$/i, "must be http(s)://host[:port], with no path or credentials"),
      ),
    ]),
  ),
  /** Region the S3 requests are signed for. Unset: AWS_REGION, else us-east-1 (what MinIO expects by default). */
  ARCHIVE_S3_REGION: v.optional(
    v.union([v.literal(""), v.pipe(v.string(), v.regex(/^[a-z0-9-]{1,64}$/, "must be a region name, e.g. eu-west-1"))]),
  ),
});

/** A comma-separated list of category names (empty entries dropped), or `fallback` when unset. */
export const categoryList = (fallback: string) =>
  v.pipe(
    v.optional(v.string(), fallback),
    v.transform((s) =>
      s
        .split(",")
        .map((c) => c.trim())
        .filter(Boolean),
    ),
    v.checkItems((c) => /^[a-z0-9][a-z0-9_.-]{0,63}$/.test(c), "must be comma-separated category names"),
  );

/**
 * The categories no preference can suppress. The processor routes them whatever the user's
 * opt-outs; the workers leave the unsubscribe link off their email, since the opt-out it would
 * record changes nothing; ingest's inbox preference centre shows them locked. All read the same
 * setting, so they agree on which categories these are.
 */
export const criticalCategories = () => ({
  /** Categories that no preference can suppress (comma-separated). Their email carries no List-Unsubscribe, whatever its priority, unless UNSUBSCRIBE_CATEGORIES lists the category. Give the processor, the workers and ingest (whose inbox preference centre shows them locked) the same list. */
  CRITICAL_CATEGORIES: categoryList("security,otp"),
});

/**
 * One-click unsubscribe (RFC 8058) in email: which messages carry a List-Unsubscribe link and
 * where it points. The workers put the header on; ingest serves the link (/u/{token}).
 */
export const unsubscribeLinks = () => ({
  /**
   * The public origin of ingest, where unsubscribe links point (<url>/u/{token}; include the path prefix ingest is served under, if any), e.g. https://notify.example.com. Mailbox providers honour one-click links over https only. Unset: http://127.0.0.1:3000 under NOTIFY_PROFILE=development; otherwise no email carries List-Unsubscribe, and the workers log a warning at start.
   */
  UNSUBSCRIBE_BASE_URL: v.optional(
    v.union([
      v.literal(""),
      v.pipe(v.string(), v.url("must be a URL"), v.regex(/^https?:\/\//i, "must be an http:// or https:// URL")),
    ]),
  ),
  /** An address that also takes unsubscribe requests by email, offered after the link in List-Unsubscribe (mailto:<address>?subject=unsubscribe <token>). Unset: the link alone. */
  UNSUBSCRIBE_MAILTO: v.optional(
    v.union([v.literal(""), v.pipe(v.string(), v.email("must be an email address"), v.maxLength(254))]),
  ),
  /** Categories whose email carries List-Unsubscribe besides promotional email, comma-separated (e.g. digest,product_news). Transactional email of other categories never does, nor email of the CRITICAL_CATEGORIES: a user must not turn off receipts or passcodes. */
  UNSUBSCRIBE_CATEGORIES: categoryList(""),
});

/** Where unsubscribe links point: UNSUBSCRIBE_BASE_URL, or the local ingest in development; undefined: nowhere. */
export const unsubscribeBaseUrl = (env: {
  UNSUBSCRIBE_BASE_URL?: string | undefined;
  NOTIFY_PROFILE: string;
}): string | undefined =>
  env.UNSUBSCRIBE_BASE_URL || (env.NOTIFY_PROFILE === "development" ? "http://127.0.0.1:3000" : undefined);

/** Settings every app shares: where the bus and database are and how to name things. */
export const common = {
  /** Postgres connection string. Required for the apps; the embedded stack provides one. */
  DATABASE_URL: url(),
  /** NATS server(s). */
  NATS_URL: v.optional(v.string(), "nats://127.0.0.1:4222"),
  /** NATS user of this app, on a server with one user per app (nats/nats.conf: ingest, processor, workers, receipts). Unset: no authentication. */
  NATS_USER: v.optional(v.pipe(v.string(), v.minLength(1, "must not be empty"))),
  /** Password of NATS_USER. */
  NATS_PASSWORD: v.optional(v.string()),
  /** At start, `apply`: create the streams, consumers and buckets that are missing; `verify`: only check that what the app uses exists, waiting for the setup job (`npm run nats:apply`) to create it. `verify` where the app's NATS user may not create them (nats/nats.conf). */
  NATS_TOPOLOGY: v.optional(v.picklist(["apply", "verify"], "must be apply or verify"), "apply"),
  /** Prefix for every stream, subject and KV bucket, so tenants and tests can share a server. */
  NATS_NAMESPACE: v.optional(v.pipe(v.string(), v.regex(/^([a-z0-9_]{1,32})?$/, "must be 0-32 of a-z, 0-9, _")), ""),
  /** Number of lane partitions. Changing it needs a drained lane (see nats/README.md). */
  LANE_PARTITIONS: int(16, 1, 64),
  /** Replicas of each stream and KV bucket an app creates: 1 on one server, 3 or 5 on a cluster. An existing one keeps its own (`npm run nats:apply -- --force` replaces it). */
  NATS_REPLICAS: int(1, 1, 5),
  /** Messages each lane stream holds at most, when an app creates it (nats/topology.json: 5000000). A full lane refuses new notifications (503) rather than drop any. */
  NATS_LANE_MAX_MSGS: optionalInt(1),
  /** Bytes each lane stream holds at most, when created (nats/topology.json: -1, the server's storage is the bound). */
  NATS_LANE_MAX_BYTES: optionalInt(-1),
  /** Work items NOTIFY_WORK holds at most, when created (nats/topology.json: 20000000). When full, routing waits and retries. */
  NATS_WORK_MAX_MSGS: optionalInt(1),
  /** Bytes NOTIFY_WORK holds at most, when created (nats/topology.json: -1). */
  NATS_WORK_MAX_BYTES: optionalInt(-1),
  /** pino level: fatal, error, warn, info (one line per request and per delivery), debug, trace or silent. Lines are JSON on standard output, written as they are logged: a process killed loses none, and a reader that stops reading holds the app at its next line. */
  LOG_LEVEL: logLevel(),
  /** Longest a single SQL statement may run (Postgres statement_timeout) before it is cancelled; a request it served answers 503. 0: no limit. */
  DB_STATEMENT_TIMEOUT_MS: int(15_000, 0, 3_600_000),
  /** Seconds to wait for in-flight work on SIGTERM before giving up. */
  SHUTDOWN_TIMEOUT_SECONDS: int(20, 1, 600),
  ...telemetry(),
};
