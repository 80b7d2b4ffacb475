import { common, int, port, text } from "@notify/config";
import * as v from "valibot";

export const ProcessorConfig = v.object({
  ...common,
  /** Health, readiness (and later metrics) port. */
  PORT: port(3001),
  HOST: text("0.0.0.0"),
  /** Lane messages handled at once per lane partition; one user's stay in order regardless. */
  PARTITION_CONCURRENCY: int(16, 1, 1024),
  /** Categories that no preference can suppress (comma-separated). */
  CRITICAL_CATEGORIES: v.pipe(
    v.optional(v.string(), "security,otp"),
    v.transform((s) =>
      s
        .split(",")
        .map((c) => c.trim())
        .filter(Boolean),
    ),
  ),
  DB_POOL_SIZE: int(10, 1, 100),
});
export type ProcessorConfig = v.InferOutput<typeof ProcessorConfig>;
