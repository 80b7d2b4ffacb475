import { type Bus, type ConsumerRunner, decodeJson, runConsumer } from "@notify/bus";
import { type Channel, PRIORITIES, type Priority, schemaProblem, WorkItem } from "@notify/core";
import type { Database } from "@notify/db";
import { retryLogLevel } from "@notify/http";
import { type DeliverDeps, deliver } from "./delivery/deliver.js";
import type { DeliveryMetrics } from "./metrics.js";
import { closeGates, type ProviderGate } from "./providers/gate.js";

export interface ConsumersDeps extends Omit<DeliverDeps, "sql" | "gate" | "failover"> {
  /** One Postgres pool per lane, so a promotional flood never takes transactional's connections. */
  databases: Record<Priority, Database>;
  gates: readonly ProviderGate[];
  /** Per channel, the providers its sends fail over to, in order. */
  failovers?: Partial<Record<Channel, readonly ProviderGate[]>>;
  concurrency: Record<Priority, number>;
}

export interface Pool {
  channel: Channel;
  lane: Priority;
  durable: string;
}

export interface Delivery {
  pools: Pool[];
  /** Every pool is pulling from its consumer (readiness). */
  healthy(): boolean;
  /** Stops pulling, sends waiting for a token back to the queue, finishes the calls in flight. */
  stop(): Promise<void>;
}

/** What is wrong with a work item read from one pool's subject; null when it is one of its own. */
const workItemProblem = (value: unknown, channel: Channel, lane: Priority): string | null => {
  const problem = schemaProblem(WorkItem, value);
  if (problem !== null) return problem;
  const item = value as WorkItem;
  if (item.channel !== channel || item.priority !== lane) {
    return `a ${item.channel} ${item.priority} item on the ${channel} ${lane} subject`;
  }
  return null;
};

/**
 * One pool per (channel, lane), for every channel whose provider is configured: each has its
 * own durable consumer, in-flight bound and Postgres pool, so a hanging provider holds only its
 * own channel (invariant 6) and promotional work never takes transactional slots (invariant 4).
 * A channel without a provider keeps its backlog in NOTIFY_WORK.
 */
export async function startConsumers(deps: ConsumersDeps): Promise<Delivery> {
  const pools: Pool[] = [];
  const runners: ConsumerRunner[] = [];
  try {
    for (const gate of deps.gates) {
      for (const lane of PRIORITIES) {
        const channel = gate.provider.channel;
        const pool = { channel, lane, durable: `worker-${channel}-${lane}` };
        runners.push(await startPool(deps, gate, pool));
        pools.push(pool);
      }
    }
  } catch (error) {
    await Promise.all(runners.map((r) => r.stop()));
    throw error;
  }
  return {
    pools,
    healthy: () => runners.every((r) => r.healthy()),
    async stop() {
      const all = [...deps.gates, ...Object.values(deps.failovers ?? {}).flat()];
      for (const gate of all) gate.limiter.close();
      await Promise.all(runners.map((r) => r.stop()));
      await closeGates(all);
    },
  };
}

async function startPool(deps: ConsumersDeps, gate: ProviderGate, pool: Pool): Promise<ConsumerRunner> {
  const { bus, metrics, log } = deps;
  const info = await bus.jsm.consumers.info(bus.streams.work, pool.durable);
  const deliverDeps: DeliverDeps = {
    ...deps,
    sql: deps.databases[pool.lane].sql,
    gate,
    failover: deps.failovers?.[pool.channel] ?? [],
  };
  const labels = { channel: pool.channel, lane: pool.lane };
  log.info(
    {
      ...labels,
      durable: pool.durable,
      concurrency: deps.concurrency[pool.lane],
      max_ack_pending: info.config.max_ack_pending,
    },
    "pool started",
  );
  return runConsumer({
    bus,
    stream: bus.streams.work,
    durable: pool.durable,
    concurrency: deps.concurrency[pool.lane],
    decode: (msg) => decodeJson<WorkItem>(msg, (value) => workItemProblem(value, pool.channel, pool.lane)),
    async handle(item) {
      metrics.inFlight.inc(labels);
      try {
        return await deliver(deliverDeps, item);
      } finally {
        metrics.inFlight.dec(labels);
      }
    },
    onError: (error, msg) =>
      log[retryLogLevel(error)](
        { err: error, ...labels, subject: msg.subject, seq: msg.seq },
        "delivery failed; will retry",
      ),
    onPoison(reason, msg) {
      metrics.poison.inc({ stream: msg.info.stream });
      log.error({ ...labels, subject: msg.subject, seq: msg.seq, reason }, "poison message set aside");
    },
    onLost: (error) =>
      log.error({ err: error, ...labels, durable: pool.durable }, "lost the work consumer; getting it back"),
  });
}

/**
 * Queue depth and ack-pending per pool, read from the server at scrape time (they span every
 * worker process), at most once per `cacheMs` however often Prometheus scrapes.
 */
export function queueDepthCollector(bus: Bus, pools: readonly Pool[], metrics: DeliveryMetrics, cacheMs = 2000) {
  let last = 0;
  return async () => {
    if (Date.now() - last < cacheMs) return;
    last = Date.now();
    await Promise.all(
      pools.map(async (pool) => {
        const info = await bus.jsm.consumers.info(bus.streams.work, pool.durable);
        const labels = { channel: pool.channel, lane: pool.lane };
        metrics.queueDepth.set(labels, info.num_pending);
        metrics.ackPending.set(labels, info.num_ack_pending);
      }),
    );
  };
}
