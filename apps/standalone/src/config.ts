import { common, port, telemetry, text } from "@notify/config";
import * as v from "valibot";

/**
 * What the one process running all four apps reads for itself. Every other setting is read by
 * each app from the same environment, as when it runs alone; PORT, ADMIN_PORT and HOST are not:
 * each app's ports and interface are the ones below.
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
  /** With the four apps in one process: the interface of ingest's public API. */
  INGEST_HOST: text("0.0.0.0"),
  /** With the four apps in one process: the interface of the processor's port (loopback: it is the operator's). */
  PROCESSOR_HOST: text("127.0.0.1"),
  /** With the four apps in one process: the interface of the workers' port (loopback: it is the operator's). */
  WORKERS_HOST: text("127.0.0.1"),
  /** With the four apps in one process: the interface provider webhooks reach. */
  RECEIPTS_HOST: text("0.0.0.0"),
  LOG_LEVEL: common.LOG_LEVEL,
  SHUTDOWN_TIMEOUT_SECONDS: common.SHUTDOWN_TIMEOUT_SECONDS,
  ...telemetry(),
});
export type StandaloneConfig = v.InferOutput<typeof StandaloneConfig>;
