import { setTimeout as sleep } from "node:timers/promises";
import { type AppliedRow, type Bus, ensureTopology, type Topology, TopologyMissingError } from "@notify/bus";
import type { Logger } from "@notify/log";
import type { MetricsRegistry } from "./metrics.js";

/**
 * What every app that publishes does at start: creates the streams, consumers and buckets it
 * needs (or, where its NATS user may not, waits until the setup job has: NATS_TOPOLOGY=verify),
 * warns about existing streams whose settings differ from the declaration (an operator's
 * choice, kept), and counts the publishes a full stream refuses in
 * notify_stream_full_refusals_total: its alert that work is being turned away.
 */
export async function prepareStreams(
  bus: Bus,
  deps: { log: Logger; metrics: MetricsRegistry; topology?: Topology; retryMs?: number },
): Promise<AppliedRow[]> {
  let report: AppliedRow[];
  for (let attempt = 0; ; attempt++) {
    try {
      report = await ensureTopology(bus, deps.topology);
      break;
    } catch (error) {
      if (!(error instanceof TopologyMissingError)) throw error;
      // Said once, then every tenth try: a deployment whose setup job has not run is visible in the log.
      if (attempt % 10 === 0)
        deps.log.warn({ missing: error.missing }, "waiting for the NATS topology (npm run nats:apply creates it)");
      await sleep(deps.retryMs ?? 1000);
    }
  }
  for (const row of report) {
    if (row.drift) {
      deps.log.warn(
        { kind: row.kind, name: row.name, differs: row.drift },
        "kept the existing settings, which differ from the declared ones (npm run nats:apply -- --force replaces them)",
      );
    }
  }
  const refused = deps.metrics.counter(
    "notify_stream_full_refusals_total",
    "Publishes a full stream refused (its limit reached; nothing stored, the caller retries or answers 503), by subject without its partition",
    ["subject"],
  );
  bus.onStreamFull((subject) => refused.inc({ subject: subject.replace(/\.\d+$/, "") }));
  return report;
}
