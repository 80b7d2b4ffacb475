import { type KV, type ProviderReport, removeWorkerReport, type WorkerReport, writeWorkerReport } from "@notify/bus";
import type { Logger } from "@notify/log";
import type { ProviderGate } from "./gate.js";

/** What this process reports of one provider now: its breaker, its buckets' rates, what waits for a token. */
export function providerReport(gate: ProviderGate): ProviderReport {
  const { rates } = gate.limiter;
  return {
    provider: gate.provider.name,
    channel: gate.provider.channel,
    breaker: gate.breaker.state(),
    lanes: {
      transactional: {
        rate_per_second: rates.reserved?.perSecond ?? 0,
        burst: rates.reserved?.burst ?? 0,
        waiting: gate.limiter.waiting("transactional"),
      },
      promotional: {
        rate_per_second: rates.shared.perSecond,
        burst: rates.shared.burst,
        waiting: gate.limiter.waiting("promotional"),
      },
    },
  };
}

export interface WorkerReporter {
  /** Writes one report now (the loop does every interval). */
  report(): Promise<void>;
  /** Stops reporting and removes this process's report. */
  stop(): Promise<void>;
}

/**
 * Reports this worker process's providers to notify_workers, under its id, every `intervalMs`:
 * what an operator reads on GET /api/v1/ops/providers. The bucket's TTL (30 s) drops the report
 * of a process that died; one that stops removes its own. A failed write is logged (the first of
 * a run of failures, then the write that works again) and the next one tried: reporting never
 * holds up delivery, and a bucket away for long does not fill the log.
 */
export function startWorkerReports(options: {
  kv: KV;
  worker: string;
  gates: readonly ProviderGate[];
  intervalMs: number;
  log: Logger;
}): WorkerReporter {
  const { kv, worker, gates, log } = options;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  let failing = false;

  const report = (): Promise<void> => {
    const body: WorkerReport = {
      worker,
      reported_at: new Date().toISOString(),
      providers: gates.map(providerReport),
    };
    inFlight = writeWorkerReport(kv, body).then(
      () => {
        if (failing) log.info("writing this worker's report to notify_workers again");
        failing = false;
      },
      (error: unknown) => {
        if (!failing) log.warn({ err: error }, "could not write this worker's report to notify_workers; will retry");
        failing = true;
      },
    );
    return inFlight;
  };

  const loop = () => {
    if (stopped) return;
    void report().finally(() => {
      if (!stopped) timer = setTimeout(loop, options.intervalMs);
    });
  };
  loop();

  return {
    report,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
      await removeWorkerReport(kv, worker).catch((error: unknown) =>
        log.warn({ err: error }, "could not remove this worker's report from notify_workers"),
      );
    },
  };
}
