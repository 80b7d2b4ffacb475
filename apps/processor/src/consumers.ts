import { type ConsumerRunner, decode, runConsumer } from "@notify/bus";
import { type LaneMessage, PRIORITIES } from "@notify/core";
import type { RouteDeps } from "./routing/route.js";
import { routeNotification } from "./routing/route.js";

/**
 * One runner per (lane, partition) durable consumer. The lanes have separate consumers and
 * separate concurrency, so a promotional backlog never holds transactional work (invariant 4);
 * within a partition, one user's messages are handled in order (keyed by user id).
 */
export async function startConsumers(deps: RouteDeps & { partitionConcurrency: number }): Promise<ConsumerRunner[]> {
  const runners: ConsumerRunner[] = [];
  for (const priority of PRIORITIES) {
    for (let partition = 0; partition < deps.bus.naming.partitions; partition++) {
      runners.push(
        await runConsumer({
          bus: deps.bus,
          stream: deps.bus.streams.lane(priority),
          durable: `processor-${priority}-p${partition}`,
          concurrency: deps.partitionConcurrency,
          keyOf: (msg) => decode<LaneMessage>(msg).user_id,
          async handle(msg) {
            const message = decode<LaneMessage>(msg);
            const outcome = await routeNotification(deps, message);
            if (outcome === "gone")
              deps.log.info({ notification_id: message.notification_id }, "notification withdrawn before routing");
            return { ack: true };
          },
          onError: (error, msg) =>
            deps.log.error({ err: error, subject: msg.subject, seq: msg.seq }, "routing failed; will retry"),
        }),
      );
    }
  }
  return runners;
}
