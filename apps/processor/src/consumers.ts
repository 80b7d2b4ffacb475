import {
  type Bus,
  type ConsumerRunner,
  decodeJson,
  onProfileChanged,
  onTemplateChanged,
  runConsumer,
} from "@notify/bus";
import { LaneMessage, PRIORITIES, type Priority, schemaProblem } from "@notify/core";
import type { Database } from "@notify/db";
import { retryLogLevel } from "@notify/http";
import type { Logger } from "@notify/log";
import { createProfileSource } from "./preferences/profiles.js";
import type { PolicyConfig, RouteDeps } from "./routing/plan.js";
import { createRenderer } from "./routing/render.js";
import { routeTraced } from "./routing/route.js";

export interface ProcessorDeps {
  /**
   * One Postgres pool per lane: a promotional flood keeps every connection of its own pool
   * busy, and transactional routing must not queue behind it (invariant 4).
   */
  databases: Record<Priority, Database>;
  bus: Bus;
  log: Logger;
  policy: PolicyConfig;
  /** Lane messages in flight per partition; one user's are handled in order regardless. */
  partitionConcurrency: number;
  /** Staleness bound of the preference cache (PREFERENCE_CACHE_TTL_MS). */
  preferenceTtlMs: number;
  /** How a message waits for the user's previous one (ORDER_HOLD unless a test shortens it). */
  orderHold?: OrderHold;
  /** A lane message waited for the user's previous one (`held`) or was routed past it (`passed`). */
  onOrderHold?: (lane: Priority, outcome: "held" | "passed") => void;
  /** A lane message was set aside as poison (counted by stream). */
  onPoison?: (stream: string) => void;
  now?: () => Date;
}

/**
 * While a partition's delivery order is in doubt (its runner started while deliveries were
 * unacknowledged, or saw one lost, taken elsewhere, repeated or sent back: see
 * createOrderWatch), routing checks that the
 * user's previous notification in the lane is routed. One that is not yet sends the message back
 * to the queue for `delayMs` (the previous one, redelivered, passes it) up to `deliveries` times;
 * then it is routed anyway, with a warning (the previous one is the reconciler's to find). The
 * budget outlasts what brings an earlier message back late: a delivery lost in transit returns
 * after the ack wait (8 s), a partition's handover takes the lease TTL and an ack wait (about
 * 20 s). A message first published late (a recovery sweep's, after a failed publish) leaves no
 * sign in the delivery sequence and is not waited for.
 */
export interface OrderHold {
  delayMs: number;
  deliveries: number;
  /** How long a sign of disorder keeps a partition's deliveries in doubt (ORDER_DOUBT_MS). */
  doubtMs?: number;
}
export const ORDER_HOLD: OrderHold = { delayMs: 1000, deliveries: 45 };

/** Routing dependencies of one lane: its own pool, renderer and profile reader. */
export async function laneDeps(deps: ProcessorDeps, lane: Priority): Promise<RouteDeps> {
  const database = deps.databases[lane];
  const render = createRenderer(database);
  // A template given a version on any ingest instance: unpinned renders read the latest again.
  // The subscription ends with the connection.
  onTemplateChanged(deps.bus, (event) => render.forget(event.template_id));
  // A user's preferences or contacts changed through ingest: their next notification reads them.
  const profiles = createProfileSource({ database, ttlMs: deps.preferenceTtlMs });
  onProfileChanged(deps.bus, (event) => profiles.forget(event.user_id));
  return {
    database,
    bus: deps.bus,
    log: deps.log.child({ lane }),
    render,
    profiles,
    policy: deps.policy,
    now: deps.now ?? (() => new Date()),
  };
}

/** The durable consumer of a lane partition. */
export const partitionDurable = (lane: Priority, partition: number) => `processor-${lane}-p${partition}`;

/**
 * The runner of one (lane, partition) durable consumer. The lanes have separate consumers,
 * concurrency and Postgres pools, so a promotional backlog never holds transactional work
 * (invariant 4); within a partition, one user's messages are handled in order, keyed by user id
 * (invariant 5).
 */
export function runPartition(
  deps: ProcessorDeps,
  lane: RouteDeps,
  priority: Priority,
  partition: number,
): Promise<ConsumerRunner> {
  return runConsumer({
    bus: deps.bus,
    stream: deps.bus.streams.lane(priority),
    durable: partitionDurable(priority, partition),
    concurrency: deps.partitionConcurrency,
    decode: (msg) => decodeJson<LaneMessage>(msg, (value) => schemaProblem(LaneMessage, value)),
    keyOf: (message) => message.user_id,
    ...(deps.orderHold?.doubtMs === undefined ? {} : { orderDoubtMs: deps.orderHold.doubtMs }),
    async handle(message, msg, delivery) {
      const hold = deps.orderHold ?? ORDER_HOLD;
      const outcome = await routeTraced(
        lane,
        message,
        delivery.orderInDoubt ? { order: msg.info.deliveryCount <= hold.deliveries ? "hold" : "report" } : {},
      );
      if (outcome === "held" || outcome === "passed") deps.onOrderHold?.(priority, outcome);
      if (outcome === "held") {
        lane.log.debug(
          { notification_id: message.notification_id, delivery: msg.info.deliveryCount },
          "held behind the user's previous notification",
        );
        return { retryInMs: hold.delayMs };
      }
      if (outcome === "gone")
        lane.log.info({ notification_id: message.notification_id }, "notification withdrawn before routing");
      return { ack: true };
    },
    onError: (error, msg) =>
      lane.log[retryLogLevel(error)]({ err: error, subject: msg.subject, seq: msg.seq }, "routing failed; will retry"),
    onPoison(reason, msg) {
      deps.onPoison?.(msg.info.stream);
      lane.log.error({ subject: msg.subject, seq: msg.seq, reason }, "poison message set aside");
    },
    onLost: (error) => lane.log.error({ err: error, partition }, "lost the lane consumer; getting it back"),
  });
}

/** Every partition of both lanes in this process (one instance, or a test). */
export async function startConsumers(deps: ProcessorDeps): Promise<ConsumerRunner[]> {
  const runners: ConsumerRunner[] = [];
  for (const priority of PRIORITIES) {
    const lane = await laneDeps(deps, priority);
    for (let partition = 0; partition < deps.bus.naming.partitions; partition++) {
      runners.push(await runPartition(deps, lane, priority, partition));
    }
  }
  return runners;
}
