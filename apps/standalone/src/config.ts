import { int, logLevel, port, telemetry } from "@notify/config";
import * as v from "valibot";

/**
 * What the one process running all four apps reads for itself. Every other setting is read by
 * each app from the same environment, as when it runs alone; PORT and ADMIN_PORT are not: each
 * app's ports are the ones below.
 */
export const StandaloneConfig = v.object({
  /** With the four apps in one process (apps/standalone): ingest's public API port. */
  INGEST_PORT: port(3000),
  /** With the four apps in one process: ingest's operator port (readiness, metrics, the console). */
  INGEST_ADMIN_PORT: port(3100),
  /** With the four apps in one process: the processor's port (health, readiness, metrics). */
  PROCESSOR_PORT: port(3001),
  /** With the four apps in one process: the workers' port (health, readiness, metrics, breakers). */
  WORKERS_PORT: port(3002),
  /** With the four apps in one process: the port provider webhooks post to. */
  RECEIPTS_PORT: port(3003),
  /** With the four apps in one process: receipts' operator port (readiness, metrics). */
  RECEIPTS_ADMIN_PORT: port(3103),
  LOG_LEVEL: logLevel(),
  SHUTDOWN_TIMEOUT_SECONDS: int(20, 1, 600),
  ...telemetry(),
});
export type StandaloneConfig = v.InferOutput<typeof StandaloneConfig>;
