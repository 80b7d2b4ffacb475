import { setTimeout as sleep } from "node:timers/promises";
import { type Bus, type ConsumerRunner, type Leases, startLeases } from "@notify/bus";
import { PRIORITIES, type Priority } from "@notify/core";
import { laneDeps, type ProcessorDeps, partitionDurable, runPartition } from "./consumers.js";

/** The lease of the deployment's periodic jobs (deferral release, broadcasts, retention, reconciler). */
export const SINGLETON = "singleton";
const partitionName = (lane: Priority, partition: number) => `${lane}.${partition}`;

export interface PartitionOptions {
  /** This instance, stable across its restarts (see INSTANCE_ID). */
  id: string;
  ttlMs?: number;
  tickMs?: number;
}

export interface LeasedPartitions {
  leases: Leases;
  /** The runners of the partitions this instance holds now. */
  runners(): ConsumerRunner[];
  stop(): Promise<void>;
}

/**
 * Waits until the partition's consumer has nothing handed out and unacknowledged, or its ack
 * wait (and a second) has passed. What the previous holder left in hand is then delivered again
 * first, before anything newer, so one user's notifications stay in order across a handover or
 * a crash.
 */
async function handedBack(bus: Bus, stream: string, durable: string): Promise<void> {
  const info = await bus.jsm.consumers.info(stream, durable);
  const deadline = Date.now() + (info.config.ack_wait ?? 30e9) / 1e6 + 1000;
  for (let pending = info.num_ack_pending; pending > 0 && Date.now() < deadline; ) {
    await sleep(250);
    pending = (await bus.jsm.consumers.info(stream, durable)).num_ack_pending;
  }
}

/**
 * The processor's share of the lane partitions, and the singleton lease, among all its running
 * instances (notify_leases): each (lane, partition) is consumed by one instance at a time and
 * moves when an instance joins, leaves or dies.
 */
export async function startLeasedPartitions(deps: ProcessorDeps, options: PartitionOptions): Promise<LeasedPartitions> {
  const kv = await deps.bus.kv("notify_leases");
  const lanes = {
    transactional: await laneDeps(deps, "transactional"),
    promotional: await laneDeps(deps, "promotional"),
  };
  const where = new Map<string, { lane: Priority; partition: number }>();
  for (const lane of PRIORITIES) {
    for (let partition = 0; partition < deps.bus.naming.partitions; partition++) {
      where.set(partitionName(lane, partition), { lane, partition });
    }
  }
  const runners = new Map<string, ConsumerRunner>();
  // One line once the spread settles rather than one per partition (there are dozens at a start
  // or a rebalance); each partition's move is at debug.
  let summary: NodeJS.Timeout | undefined;
  const summarize = () => {
    clearTimeout(summary);
    summary = setTimeout(() => {
      deps.log.info(
        { instance: options.id, partitions: runners.size, of: where.size },
        `holding ${runners.size} of ${where.size} lane partitions`,
      );
    }, 1000);
    summary.unref();
  };
  const leases = startLeases({
    kv,
    id: options.id,
    names: [SINGLETON, ...where.keys()],
    ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
    ...(options.tickMs === undefined ? {} : { tickMs: options.tickMs }),
    async start(name) {
      const at = where.get(name);
      if (at) {
        await handedBack(deps.bus, deps.bus.streams.lane(at.lane), partitionDurable(at.lane, at.partition));
        runners.set(name, await runPartition(deps, lanes[at.lane], at.lane, at.partition));
      }
      if (at) summarize();
      deps.log[at ? "debug" : "info"]({ lease: name, instance: options.id }, "lease taken");
    },
    async stop(name) {
      const runner = runners.get(name);
      runners.delete(name);
      await runner?.stop();
      if (where.has(name)) summarize();
      deps.log[where.has(name) ? "debug" : "info"]({ lease: name, instance: options.id }, "lease given up");
    },
    onError: (error, what) => deps.log.warn({ err: error, lease: what }, "partition leases: will retry"),
  });
  return {
    leases,
    runners: () => [...runners.values()],
    async stop() {
      await leases.stop();
      clearTimeout(summary);
    },
  };
}
