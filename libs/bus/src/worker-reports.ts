import type { KV } from "@nats-io/kv";
import type { Channel, LaneBuckets } from "@notify/core";
import type { Bus } from "./connection.js";
import { jsonBytes } from "./nats-client.js";
import { bucketName } from "./topology.js";

export type BreakerStateName = "open" | "closed" | "half_open";

/** One token bucket of a provider as a worker process runs it, and its sends waiting for a token. */
export interface LaneReport {
  rate_per_second: number;
  burst: number;
  /** Sends of this lane waiting for a token in the process. */
  waiting: number;
}

/** A provider as one worker process sees it. */
export interface ProviderReport {
  provider: string;
  channel: Channel;
  /** The process's own breaker (it takes the other processes' decisions over, notify_breakers). */
  breaker: BreakerStateName;
  /**
   * The provider's buckets: `transactional` is the reserve only transactional sends use (rate 0
   * when TRANSACTIONAL_RESERVED_PERCENT is 0), `promotional` the shared bucket, which
   * transactional sends use too once their reserve is spent.
   */
  lanes: { transactional: LaneReport; promotional: LaneReport };
}

/** What a worker process writes to notify_workers under its id every few seconds. */
export interface WorkerReport {
  /** The process (host:pid). */
  worker: string;
  /** RFC 3339. */
  reported_at: string;
  providers: ProviderReport[];
}

/**
 * A provider's last shared breaker decision, as workers write it to notify_breakers under the
 * provider's name (apps/workers shared-breaker.ts): the state, the deciding process, its clock (ms).
 */
export interface BreakerDecision {
  state: "open" | "closed";
  by: string;
  at: number;
}

/**
 * A worker id as a KV key: keys allow letters, digits and `-/_=.` only, so every other
 * character (the `:` of host:pid) is written `=` and its code point in hex, and `=` itself too.
 */
export const workerKey = (worker: string) =>
  worker.replace(/[^-/_.A-Za-z0-9]/g, (c) => `=${(c.codePointAt(0) as number).toString(16)}=`);

/** Writes (replaces) a process's report; the bucket's TTL drops it once the process stops writing. */
export async function writeWorkerReport(kv: KV, report: WorkerReport): Promise<void> {
  await kv.put(workerKey(report.worker), jsonBytes(report));
}

/** Removes a process's report (it stops): its providers are no longer reported by it. */
export async function removeWorkerReport(kv: KV, worker: string): Promise<void> {
  await kv.delete(workerKey(worker));
}

/** The keys a bucket holds a live value under, read from its stream's subjects (no consumer is created). */
async function keysOf(bus: Bus, bucket: string): Promise<string[]> {
  const name = bucketName(bus.naming, bucket);
  const prefix = `$KV.${name}.`;
  const info = await bus.jsm.streams.info(`KV_${name}`, { subjects_filter: `${prefix}>` });
  return Object.keys(info.state.subjects ?? {})
    .filter((subject) => subject.startsWith(prefix))
    .map((subject) => subject.slice(prefix.length))
    .sort();
}

/** A JSON value under `key`; null when there is none, it was deleted, or it does not parse. */
async function readJson<T>(kv: KV, key: string): Promise<T | null> {
  const entry = await kv.get(key);
  if (entry?.operation !== "PUT") return null;
  try {
    return entry.json<T>();
  } catch {
    return null;
  }
}

/** Every live worker process's last report, by worker id. */
export async function readWorkerReports(bus: Bus): Promise<WorkerReport[]> {
  const kv = await bus.kv("notify_workers");
  const reports: WorkerReport[] = [];
  for (const key of await keysOf(bus, "notify_workers")) {
    const report = await readJson<WorkerReport>(kv, key);
    if (report && typeof report.worker === "string" && Array.isArray(report.providers)) reports.push(report);
  }
  return reports.sort((a, b) => (a.worker < b.worker ? -1 : a.worker > b.worker ? 1 : 0));
}

/** The JSON value of each key a bucket holds, by key (keys it does not hold are left out). */
async function readJsonByKey<T>(
  bus: Bus,
  bucket: "notify_breakers" | "notify_rate",
  keys: readonly string[],
): Promise<Map<string, T>> {
  const kv = await bus.kv(bucket);
  const values = new Map<string, T>();
  for (const key of keys) {
    const value = await readJson<T>(kv, key);
    if (value) values.set(key, value);
  }
  return values;
}

/** The providers' last shared breaker decisions (notify_breakers), for those that have one. */
export const readBreakerDecisions = (bus: Bus, providers: readonly string[]) =>
  readJsonByKey<BreakerDecision>(bus, "notify_breakers", providers);

/** The providers' shared token buckets (notify_rate: GCRA arrival times, ms), for those used yet. */
export const readRateStates = (bus: Bus, providers: readonly string[]) =>
  readJsonByKey<LaneBuckets>(bus, "notify_rate", providers);
