import { setTimeout as sleep } from "node:timers/promises";
import {
  AckPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { connect, type NatsConnection, nanos } from "@nats-io/transport-node";
import type { Channel, Priority } from "@notify/core";
import { createPublisher } from "./publisher.js";
import {
  bucketName,
  type ConsumerDef,
  type KvDef,
  loadTopologyFile,
  type Naming,
  resolveTopology,
  type StreamDef,
  streamName,
  subjectName,
  type Topology,
} from "./topology.js";

export * from "./dead-letters.js";
export * from "./errors.js";
export * from "./oldest.js";
export * from "./publisher.js";
export * from "./send-guard.js";
export * from "./topology.js";
export type { JsMsg, KV, NatsConnection };

export interface BusConfig extends Naming {
  servers: string;
  /** Connection name shown by `nats server report connections`. */
  name: string;
  /** Publish acknowledgement timeout: how long ingest waits before answering 503. */
  publishTimeoutMs?: number;
  /** Wait for a first connection instead of failing when NATS is down at start. */
  waitOnFirstConnect?: boolean;
}

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  naming: Naming;
  /** False while the connection is down: publishers answer 503 at once instead of waiting. */
  isConnected(): boolean;
  subjects: {
    lane(priority: Priority, partition: number): string;
    work(channel: Channel, priority: Priority): string;
    dlq(channel: Channel): string;
  };
  streams: { lane(priority: Priority): string; work: string; dlq: string };
  kv(bucket: "notify_send_guard" | "notify_prefs" | "notify_rate"): Promise<KV>;
  publish(subject: string, payload: unknown, msgId: string): Promise<{ seq: number; duplicate: boolean }>;
  close(): Promise<void>;
}

export async function connectBus(config: BusConfig): Promise<Bus> {
  const nc = await connect({
    servers: config.servers.split(",").map((s) => s.trim()),
    name: config.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: config.waitOnFirstConnect ?? false,
    timeout: 3000,
  });
  let connected = true;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") connected = false;
      if (status.type === "reconnect") connected = true;
    }
  })();
  const jsm = await jetstreamManager(nc, { timeout: 5000 });
  const js = jetstream(nc, { timeout: config.publishTimeoutMs ?? 3000 });
  const kvm = new Kvm(js);
  const publisher = createPublisher(nc, config.publishTimeoutMs ?? 3000);
  const buckets = new Map<string, Promise<KV>>();
  const naming: Naming = { namespace: config.namespace, partitions: config.partitions };
  const encoder = new TextEncoder();
  return {
    nc,
    js,
    jsm,
    naming,
    isConnected: () => connected && !nc.isClosed(),
    subjects: {
      lane: (priority, partition) => subjectName(naming, `notify.lane.${priority}.${partition}`),
      work: (channel, priority) => subjectName(naming, `notify.work.${channel}.${priority}`),
      dlq: (channel) => subjectName(naming, `notify.dlq.${channel}`),
    },
    streams: {
      lane: (priority) =>
        streamName(naming, priority === "transactional" ? "NOTIFY_LANE_TRANSACTIONAL" : "NOTIFY_LANE_PROMOTIONAL"),
      work: streamName(naming, "NOTIFY_WORK"),
      dlq: streamName(naming, "NOTIFY_DLQ"),
    },
    kv(bucket) {
      const name = bucketName(naming, bucket);
      let kv = buckets.get(name);
      if (!kv) {
        kv = kvm.open(name);
        buckets.set(name, kv);
      }
      return kv;
    },
    publish(subject, payload, msgId) {
      return publisher.publish(subject, encoder.encode(JSON.stringify(payload)), msgId);
    },
    async close() {
      publisher.close();
      if (nc.isClosed()) return;
      await nc.drain().catch(() => nc.close());
    },
  };
}

const SECOND_NS = 1_000_000_000;

function streamConfig(def: StreamDef) {
  return {
    name: def.name,
    description: def.description,
    subjects: def.subjects,
    retention: {
      workqueue: RetentionPolicy.Workqueue,
      limits: RetentionPolicy.Limits,
      interest: RetentionPolicy.Interest,
    }[def.retention],
    storage: def.storage === "file" ? StorageType.File : StorageType.Memory,
    max_age: def.max_age_seconds * SECOND_NS,
    duplicate_window: def.duplicate_window_seconds * SECOND_NS,
    discard: def.discard === "old" ? DiscardPolicy.Old : DiscardPolicy.New,
    num_replicas: 1,
  };
}

function consumerConfig(def: ConsumerDef) {
  return {
    durable_name: def.durable,
    description: def.description,
    filter_subject: def.filter_subject,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(def.ack_wait_seconds * 1000),
    max_ack_pending: def.max_ack_pending,
    max_deliver: def.max_deliver,
  };
}

async function applyStream(jsm: JetStreamManager, def: StreamDef) {
  const config = streamConfig(def);
  try {
    await jsm.streams.info(def.name);
  } catch {
    await jsm.streams.add(config);
    return "created";
  }
  await jsm.streams.update(def.name, config);
  return "updated";
}

async function applyConsumer(jsm: JetStreamManager, def: ConsumerDef) {
  const config = consumerConfig(def);
  try {
    await jsm.consumers.info(def.stream, def.durable);
  } catch {
    await jsm.consumers.add(def.stream, config);
    return "created";
  }
  const { durable_name: _, filter_subject: __, ...mutable } = config;
  await jsm.consumers.update(def.stream, def.durable, mutable);
  return "updated";
}

async function applyKv(js: JetStreamClient, def: KvDef) {
  await new Kvm(js).create(def.bucket, {
    description: def.description,
    ttl: def.ttl_seconds * 1000,
    history: def.history,
    storage: def.storage === "file" ? StorageType.File : StorageType.Memory,
  });
  return "ensured";
}

/**
 * Creates or updates every stream, consumer and KV bucket of the topology. Idempotent: safe at
 * every app start and from several processes at once.
 */
export async function applyTopology(
  bus: Pick<Bus, "jsm" | "js" | "naming">,
  topology: Topology = loadTopologyFile(),
): Promise<Array<{ kind: string; name: string; result: string }>> {
  const resolved = resolveTopology(topology, bus.naming);
  const report: Array<{ kind: string; name: string; result: string }> = [];
  for (const def of resolved.streams)
    report.push({ kind: "stream", name: def.name, result: await applyStream(bus.jsm, def) });
  for (const def of resolved.kv) report.push({ kind: "kv", name: def.bucket, result: await applyKv(bus.js, def) });
  for (const def of resolved.consumers) {
    report.push({ kind: "consumer", name: `${def.stream}/${def.durable}`, result: await applyConsumer(bus.jsm, def) });
  }
  return report;
}

/** What a handler decides for a message. A retryable failure always carries a delay. */
export type Disposition = { ack: true } | { retryInMs: number } | { terminate: string };

export interface ConsumerRunnerOptions {
  bus: Bus;
  stream: string;
  durable: string;
  /** Messages handled at once by this runner. */
  concurrency: number;
  /** Messages with the same key are handled one after another, in delivery order. */
  keyOf?: (msg: JsMsg) => string;
  handle(msg: JsMsg): Promise<Disposition>;
  onError(error: unknown, msg: JsMsg): void;
  /** The consumer was lost, or could not be put back yet (logged by the app; the runner keeps trying). */
  onLost?(error: unknown): void;
}

export interface ConsumerRunner {
  /** Stops pulling, then waits for the messages in hand to finish. */
  stop(): Promise<void>;
  inFlight(): number;
  /** False while the runner has lost its consumer and is getting it back: readiness says so. */
  healthy(): boolean;
}

/** Backoff for handler crashes: exponential with full jitter, capped, never a bare nak. */
export const crashBackoffMs = (deliveryCount: number) =>
  Math.round(Math.random() * Math.min(30_000, 250 * 2 ** Math.min(deliveryCount, 10)));

/**
 * Pulls from a durable consumer and settles every message through `handle`, at most
 * `concurrency` at once and in order per key. The client keeps pulling through outages; when the
 * consumer (or its stream) is gone, deleted by hand or lost by the server, the runner reports
 * itself unhealthy, puts the declared topology back, and is healthy again once the consumer
 * answers: it never idles while readiness says all is well.
 */
export async function runConsumer(options: ConsumerRunnerOptions): Promise<ConsumerRunner> {
  const pull = async () => {
    const consumer = await options.bus.js.consumers.get(options.stream, options.durable);
    return consumer.consume({ max_messages: Math.max(options.concurrency * 2, 16) });
  };
  let messages = await pull();
  const chains = new Map<string, Promise<void>>();
  const inFlight = new Set<Promise<void>>();
  let slots = options.concurrency;
  let wake: (() => void) | undefined;
  let healthy = true;
  let recovering: Promise<void> | undefined;
  const stopped = new AbortController();
  const pause = (failures: number) =>
    sleep(Math.min(10_000, 500 * 2 ** failures), undefined, { signal: stopped.signal }).catch(() => {});

  const settle = async (msg: JsMsg) => {
    let disposition: Disposition;
    try {
      disposition = await options.handle(msg);
    } catch (error) {
      options.onError(error, msg);
      disposition = { retryInMs: crashBackoffMs(msg.info.deliveryCount) };
    }
    if ("ack" in disposition) await msg.ackAck().catch(() => msg.ack());
    else if ("retryInMs" in disposition) msg.nak(disposition.retryInMs);
    else msg.term(disposition.terminate);
  };

  const lost = (error: unknown) => {
    if (healthy) options.onLost?.(error);
    healthy = false;
  };

  // The declared topology is put back until the consumer answers; then the pull starts afresh
  // (the old one would only notice at its next expiry, up to 30 s later).
  const recover = () => {
    recovering ??= (async () => {
      for (let failures = 0; !stopped.signal.aborted; failures++) {
        try {
          await applyTopology(options.bus);
          await options.bus.jsm.consumers.info(options.stream, options.durable);
          await messages.close();
          return;
        } catch (error) {
          options.onLost?.(error);
        }
        await pause(failures);
      }
    })().finally(() => {
      recovering = undefined;
    });
  };

  const watch = (current: typeof messages) => {
    void (async () => {
      for await (const status of current.status()) {
        if (["consumer_deleted", "consumer_not_found", "stream_not_found"].includes(status.type)) {
          lost(new Error(`${options.stream}/${options.durable}: ${status.type}`));
          recover();
        }
      }
    })().catch(() => {});
  };

  const drain = async (current: typeof messages) => {
    for await (const msg of current) {
      while (slots === 0) await new Promise<void>((resolve) => (wake = resolve));
      slots--;
      const key = options.keyOf?.(msg);
      const previous = key === undefined ? undefined : chains.get(key);
      const task: Promise<void> = (previous ?? Promise.resolve())
        .then(() => settle(msg))
        .finally(() => {
          slots++;
          inFlight.delete(task);
          if (key !== undefined && chains.get(key) === task) chains.delete(key);
          wake?.();
          wake = undefined;
        });
      inFlight.add(task);
      if (key !== undefined) chains.set(key, task);
    }
  };

  const loop = (async () => {
    watch(messages);
    while (!stopped.signal.aborted) {
      try {
        await drain(messages);
      } catch (error) {
        lost(error);
      }
      if (stopped.signal.aborted) return;
      // Ended without stop(): closed by a recovery, or lost in a way the client gave up on.
      if (!recovering && healthy) lost(new Error(`the pull from ${options.stream}/${options.durable} ended`));
      for (let failures = 0; !stopped.signal.aborted; failures++) {
        try {
          messages = await pull();
          watch(messages);
          healthy = true;
          break;
        } catch (error) {
          lost(error);
          recover();
          await pause(failures);
        }
      }
    }
  })();

  return {
    inFlight: () => inFlight.size,
    healthy: () => healthy,
    async stop() {
      stopped.abort();
      await messages.close();
      wake?.();
      await loop.catch(() => {});
      await recovering;
      await Promise.allSettled([...inFlight]);
    },
  };
}

export const decode = <T>(msg: JsMsg): T => msg.json<T>();
