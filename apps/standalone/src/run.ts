import type { RunningApp } from "@notify/http";
import { startIngest } from "@notify/ingest/start";
import type { Logger } from "@notify/log";
import { startProcessor } from "@notify/processor/start";
import { startReceipts } from "@notify/receipts/start";
import { startWorkers } from "@notify/workers/start";
import type { StandaloneConfig } from "./config.js";

export type Env = Record<string, string | undefined>;
export const APPS = ["ingest", "processor", "workers", "receipts"] as const;
export type AppName = (typeof APPS)[number];

/** Each app's environment: this process's own, with that app's ports in PORT and ADMIN_PORT. */
export function appEnvironments(env: Env, config: StandaloneConfig): Record<AppName, Env> {
  return {
    ingest: { ...env, PORT: String(config.INGEST_PORT), ADMIN_PORT: String(config.INGEST_ADMIN_PORT) },
    processor: { ...env, PORT: String(config.PROCESSOR_PORT) },
    workers: { ...env, PORT: String(config.WORKERS_PORT) },
    receipts: { ...env, PORT: String(config.RECEIPTS_PORT), ADMIN_PORT: String(config.RECEIPTS_ADMIN_PORT) },
  };
}

/** Runs every stop given, all of them even when one fails; throws the first failure after. */
async function stopEach(stops: Array<(() => Promise<void>) | undefined>): Promise<void> {
  const results = await Promise.allSettled(stops.map((stop) => stop?.()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
}

/**
 * Starts the four apps in this process, each with its own connections, servers and background
 * work as when it runs alone: receipts first and ingest last, so what accepts work comes up once
 * what handles it runs. When one fails to start, those already running are stopped and the
 * error is thrown. Stopping goes the other way: ingest first (no new work), then the processor
 * and the workers (each finishes what it holds), then receipts (the events of the last sends
 * still land).
 */
export async function startAll(env: Env, config: StandaloneConfig, log: Logger): Promise<RunningApp> {
  const envs = appEnvironments(env, config);
  const own = { telemetry: false };
  const running: Partial<Record<AppName, RunningApp>> = {};
  const stop = async () => {
    await stopEach([running.ingest?.stop]);
    await stopEach([running.processor?.stop, running.workers?.stop]);
    await stopEach([running.receipts?.stop]);
  };
  try {
    running.receipts = await startReceipts(envs.receipts, own);
    running.workers = await startWorkers(envs.workers, own);
    running.processor = await startProcessor(envs.processor, own);
    running.ingest = await startIngest(envs.ingest, own);
  } catch (error) {
    await stop().catch((stopError: unknown) => log.error({ err: stopError }, "stopping after a failed start failed"));
    throw error;
  }
  return { log, shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_SECONDS * 1000, stop };
}
