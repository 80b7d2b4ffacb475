import { type ConsumerRunner, decode, runConsumer } from "@notify/bus";
import type { WorkItem } from "@notify/core";
import { type DeliverDeps, deliver } from "./delivery/deliver.js";

/**
 * One pool per (channel, lane): each has its own durable consumer and concurrency, so a slow
 * provider holds only its own channel (invariant 6) and promotional work never takes the
 * transactional pool's slots (invariant 4).
 */
export async function startConsumers(
  deps: DeliverDeps & { transactionalConcurrency: number; promotionalConcurrency: number },
): Promise<ConsumerRunner[]> {
  const channel = deps.provider.channel;
  const pools = [
    { priority: "transactional", concurrency: deps.transactionalConcurrency },
    { priority: "promotional", concurrency: deps.promotionalConcurrency },
  ] as const;
  return Promise.all(
    pools.map(({ priority, concurrency }) =>
      runConsumer({
        bus: deps.bus,
        stream: deps.bus.streams.work,
        durable: `worker-${channel}-${priority}`,
        concurrency,
        handle: (msg) => deliver(deps, decode<WorkItem>(msg)),
        onError: (error, msg) =>
          deps.log.error({ err: error, subject: msg.subject, seq: msg.seq }, "delivery failed; will retry"),
      }),
    ),
  );
}
