import { loadConfig } from "@notify/config";
import type { RunningApp } from "@notify/http";
import { IngestConfig, startIngest } from "@notify/ingest";
import type { Logger } from "@notify/log";
import { ProcessorConfig, startProcessor } from "@notify/processor";
import { ReceiptsConfig, startReceipts } from "@notify/receipts";
import { startWorkers, WorkersConfig } from "@notify/workers";
import type { StandaloneConfig } from "./config.js";

export type Env = Record<string, string | undefined>;
export type AppName = "ingest" | "processor" | "workers" | "receipts";

/** Each app's environment: this process's own, with that app's port(s) and interface. */
export function appEnvironments(env: Env, config: StandaloneConfig): Record<AppName, Env> {
  return {
    ingest: {
      ...env,
      PORT: String(config.INGEST_PORT),
      ADMIN_PORT: String(config.INGEST_ADMIN_PORT),
      HOST: config.INGEST_HOST,
    },
    processor: { ...env, PORT: String(config.PROCESSOR_PORT), HOST: config.PROCESSOR_HOST },
    workers: { ...env, PORT: String(config.WORKERS_PORT), HOST: config.WORKERS_HOST },
    receipts: {
      ...env,
      PORT: String(config.RECEIPTS_PORT),
      ADMIN_PORT: String(config.RECEIPTS_ADMIN_PORT),
      HOST: config.RECEIPTS_HOST,
    },
  };
}

/** Every app's settings checked before any app starts: a wrong one exits 78, as an app alone does. */
export function checkSettings(envs: Record<AppName, Env>): void {
  loadConfig(IngestConfig, envs.ingest);
  loadConfig(ProcessorConfig, envs.processor);
  loadConfig(WorkersConfig, envs.workers);
  loadConfig(ReceiptsConfig, envs.receipts);
}

/** Runs every stop given, all of them even when one fails; answers the first failure. */
async function stopEach(stops: Array<(() => Promise<void>) | undefined>): Promise<unknown> {
  const results = await Promise.allSettled(stops.map((stop) => stop?.()));
  return results.find((r): r is PromiseRejectedResult => r.status === "rejected")?.reason;
}

export interface RunningApps extends RunningApp {
  /**
   * Resolves true once the four run, false when a stop came first; rejects when one could not
   * start (the others are stopped then).
   */
  started: Promise<boolean>;
}

/**
 * Starts the four apps in this process, each with its own connections, servers and background
 * work as when it runs alone: receipts first and ingest last, so what accepts work comes up once
 * what handles it runs. When one fails to start, those already running are stopped (within the
 * shutdown timeout) and `started` rejects. `stop` may be called at any time: during the start
 * it stops the apps that run at once, none starts after it, and one that was starting is
 * stopped as soon as it is up. It goes the other way: ingest first (no new work), then the
 * processor and the workers (each finishes what it holds), then receipts (the events of the
 * last sends still land); a stop that fails does not keep the later ones from running.
 */
export function startAll(env: Env, config: StandaloneConfig, log: Logger): RunningApps {
  const envs = appEnvironments(env, config);
  const own = { telemetry: false };
  const running: Partial<Record<AppName, RunningApp>> = {};
  let stopping = false;
  // Each app is stopped once: what runs is taken out of `running` as its stop begins.
  const take = (name: AppName) => {
    const app = running[name];
    delete running[name];
    return app?.stop;
  };
  const stopRunning = async () => {
    const failures = [
      await stopEach([take("ingest")]),
      await stopEach([take("processor"), take("workers")]),
      await stopEach([take("receipts")]),
    ];
    const failed = failures.find((f) => f !== undefined);
    if (failed !== undefined) throw failed;
  };
  const starts: Array<[AppName, () => Promise<RunningApp>]> = [
    ["receipts", () => startReceipts(envs.receipts, own)],
    ["workers", () => startWorkers(envs.workers, own)],
    ["processor", () => startProcessor(envs.processor, own)],
    ["ingest", () => startIngest(envs.ingest, own)],
  ];
  const started = (async () => {
    try {
      for (const [name, start] of starts) {
        if (stopping) return false;
        const app = await start();
        // Asked to stop while it started: it stops now, and nothing more starts.
        if (stopping) {
          await app.stop();
          return false;
        }
        running[name] = app;
      }
      return true;
    } catch (error) {
      // A stop is under way: it stops what runs; this start's failure is part of stopping.
      if (stopping) return false;
      const deadline = new Promise((resolve) => setTimeout(resolve, config.SHUTDOWN_TIMEOUT_SECONDS * 1000).unref());
      await Promise.race([
        stopRunning().catch((stopError: unknown) =>
          log.error({ err: stopError }, "stopping after a failed start failed"),
        ),
        deadline,
      ]);
      throw error;
    }
  })();
  return {
    log,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_SECONDS * 1000,
    started,
    async stop() {
      stopping = true;
      await stopRunning();
    },
  };
}
