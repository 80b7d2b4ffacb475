import { common, int, port, text, url } from "@notify/config";
import * as v from "valibot";

export const WorkersConfig = v.object({
  ...common,
  /** Health and readiness port. */
  PORT: port(3002),
  HOST: text("0.0.0.0"),
  /** Sends in flight per (channel, lane) pool. */
  TRANSACTIONAL_CONCURRENCY: int(32, 1, 1024),
  PROMOTIONAL_CONCURRENCY: int(16, 1, 1024),
  /** N of the spec: provider attempts before a transient failure is dead-lettered. */
  MAX_ATTEMPTS: int(5, 1, 50),
  /** Backoff base and cap for transient failures (exponential, full jitter). */
  RETRY_BASE_MS: int(1000, 10, 600_000),
  RETRY_MAX_MS: int(300_000, 100, 3_600_000),
  /** SendGrid: the API key (secret; never logged) and base URL (the sandbox in development). */
  SENDGRID_API_KEY: v.pipe(v.string("is required"), v.minLength(1, "is required")),
  SENDGRID_BASE_URL: url("https://api.sendgrid.com"),
  EMAIL_FROM: v.optional(v.pipe(v.string(), v.email("must be an email address")), "notifications@example.com"),
  EMAIL_FROM_NAME: text("Notify"),
  /** A provider call that takes longer counts as a transient timeout. */
  PROVIDER_TIMEOUT_MS: int(10_000, 100, 120_000),
  DB_POOL_SIZE: int(10, 1, 100),
});
export type WorkersConfig = v.InferOutput<typeof WorkersConfig>;
