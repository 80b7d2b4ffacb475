import type { Bus } from "@notify/bus";
import { PRIORITIES } from "@notify/core";
import type { MetricsRegistry } from "@notify/http";

/**
 * Per lane consumer: messages waiting for this stage, and messages handed out but not yet
 * acknowledged; per lane and work stream, how full it is. Read from JetStream at scrape time (at most every `cacheMs`), so the figures
 * cover every processor instance, not just this one.
 */
export function laneBacklogCollector(bus: Bus, metrics: MetricsRegistry, cacheMs = 2000) {
  const pending = metrics.gauge("notify_lane_pending", "Lane messages not yet handed to a processor", [
    "lane",
    "partition",
  ]);
  const ackPending = metrics.gauge("notify_lane_ack_pending", "Lane messages handed out and not yet acknowledged", [
    "lane",
    "partition",
  ]);
  const fill = metrics.gauge(
    "notify_stream_fill_ratio",
    "How full each lane and work stream is against its message or byte limit (the larger; 0 without limits): at 1 new work is refused",
    ["stream"],
  );
  const streams = [...PRIORITIES.map((lane) => bus.streams.lane(lane)), bus.streams.work];
  let last = 0;
  return async () => {
    if (Date.now() - last < cacheMs) return;
    last = Date.now();
    const fills = streams.map(async (stream) => {
      const { config, state } = await bus.jsm.streams.info(stream);
      const ratio = (used: number, max: number | undefined) => (max !== undefined && max > 0 ? used / max : 0);
      fill.set({ stream }, Math.max(ratio(state.messages, config.max_msgs), ratio(state.bytes, config.max_bytes)));
    });
    const reads = PRIORITIES.flatMap((lane) =>
      Array.from({ length: bus.naming.partitions }, async (_, partition) => {
        const info = await bus.jsm.consumers.info(bus.streams.lane(lane), `processor-${lane}-p${partition}`);
        const labels = { lane, partition: String(partition) };
        pending.set(labels, info.num_pending);
        ackPending.set(labels, info.num_ack_pending);
      }),
    );
    await Promise.all([...reads, ...fills]);
  };
}

/** Counts what the reconciler found stalled and drove on, by kind. */
export function reconcilerCounter(metrics: MetricsRegistry) {
  const found = metrics.counter(
    "notify_reconciler_found_total",
    "Stalled work the reconciler found and drove on: unrouted, unsent, in_app_unsettled",
    ["kind"],
  );
  return (kind: string, count: number) => found.inc({ kind }, count);
}

/** Counts lane messages that waited for the user's previous notification, or were routed past it. */
export function orderHoldCounter(metrics: MetricsRegistry) {
  const holds = metrics.counter(
    "notify_order_holds_total",
    "Lane messages whose user's previous notification was not routed yet: held (sent back to wait for it) or passed (routed past it after the hold budget, with a warning)",
    ["lane", "outcome"],
  );
  return (lane: string, outcome: "held" | "passed") => holds.inc({ lane, outcome });
}

/** Counts lane messages set aside as poison (undecodable or invalid), by stream. */
export function poisonCounter(metrics: MetricsRegistry) {
  const poison = metrics.counter(
    "notify_poison_messages_total",
    "Messages that could not be decoded or validated, set aside on notify.dlq.poison.<stream> and acknowledged",
    ["stream"],
  );
  return (stream: string) => poison.inc({ stream });
}
