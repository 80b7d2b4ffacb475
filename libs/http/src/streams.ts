import { setTimeout as sleep } from "node:timers/promises";
import { type AppliedRow, type Bus, ensureTopology, type Topology, TopologyMissingError } from "@notify/bus";
import type { Logger } from "@notify/log";
import { unavailableDependency } from "./dependency-errors.js";
import type { MetricsRegistry } from "./metrics.js";

/**
 * What every app that publishes does at start: creates the streams, consumers and buckets it
 * needs (or, where its NATS user may not, waits until the setup job has: NATS_TOPOLOGY=verify),
 * warns about existing streams whose settings differ from the declaration (an operator's
 * choice, kept), and counts the publishes a full stream refuses in
 * notify_stream_full_refusals_total: its alert that work is being turned away. NATS out of reach
 * or not answering in time (a server restarting, JetStream recovering its streams) is waited
 * for like a missing topology: the start goes on when it answers, instead of ending the process.
 * From then on, a KV bucket found gone while the app runs is logged here, once each time.
 */
export async function prepareStreams(
  bus: Bus,
  deps: { log: Logger; metrics: MetricsRegistry; topology?: Topology; retryMs?: number },
): Promise<AppliedRow[]> {
  let report: AppliedRow[];
  for (let missing = 0, away = 0; ; ) {
    try {
      report = await ensureTopology(bus, deps.topology);
      break;
    } catch (error) {
      // Each said once, then every tenth try: a deployment whose setup job has not run, or whose
      // NATS does not answer, is visible in the log.
      if (error instanceof TopologyMissingError) {
        if (missing++ % 10 === 0)
          deps.log.warn({ missing: error.missing }, "waiting for the NATS topology (npm run nats:apply creates it)");
      } else if (unavailableDependency(error) === "nats") {
        if (away++ % 10 === 0)
          deps.log.warn({ err: error }, "NATS did not answer while checking the topology; trying again");
      } else throw error;
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
  bus.onBucketEvent((event) => {
    if (event.state === "restored")
      deps.log.warn(
        { bucket: event.bucket },
        "a KV bucket was gone from the NATS server (a restart loses memory buckets); it is there again",
      );
    else
      deps.log.warn(
        { bucket: event.bucket, err: event.error },
        "a KV bucket is gone from the NATS server and could not be put back: working without it, trying again (NATS_TOPOLOGY=verify waits for npm run nats:apply)",
      );
  });
  return report;
}
