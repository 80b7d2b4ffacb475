import { common, int, port, text } from "@notify/config";
import * as v from "valibot";

export const IngestConfig = v.object({
  ...common,
  /** HTTP port of the public API. */
  PORT: port(3000),
  /** Interface to bind; 0.0.0.0 in containers. */
  HOST: text("0.0.0.0"),
  /** Largest accepted request body in bytes (413 beyond). */
  MAX_BODY_BYTES: int(262_144, 1024, 10_485_760),
  /** How long an API key lookup is cached: revocation takes effect everywhere within this bound. */
  AUTH_CACHE_TTL_SECONDS: int(5, 0, 60),
  /** How long a publish may wait for JetStream's ack before POST answers 503. */
  PUBLISH_TIMEOUT_MS: int(3000, 100, 30_000),
  /** Recovery sweep: rows committed but never published, older than the grace, are republished. */
  RECOVERY_INTERVAL_MS: int(2000, 100, 600_000),
  RECOVERY_GRACE_MS: int(5000, 0, 600_000),
  /** Postgres pool size of this process. */
  DB_POOL_SIZE: int(10, 1, 100),
});
export type IngestConfig = v.InferOutput<typeof IngestConfig>;
