import {
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Channel, Priority } from "@notify/core";
import { DEFAULT_STREAM_SETTINGS, type StreamSettings } from "./apply.js";
import { isStreamFull } from "./errors.js";
import { createPublisher } from "./publisher.js";
import { bucketName, type Naming, streamName, subjectName } from "./topology.js";

export * from "./apply.js";
export * from "./consumer.js";
export * from "./dead-letters.js";
export * from "./errors.js";
export * from "./oldest.js";
export * from "./poison.js";
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
  /** Replicas and limits of the streams and buckets this process creates (applyTopology). */
  streamSettings?: StreamSettings;
}

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  naming: Naming;
  streamSettings: StreamSettings;
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
  /**
   * Called for each publish a full stream refused (its limit reached, discard new): the work was
   * not stored and its caller was told so. Apps count these in an alert metric.
   */
  onStreamFull(listener: (subject: string) => void): void;
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
  const fullListeners: Array<(subject: string) => void> = [];
  return {
    nc,
    js,
    jsm,
    naming,
    streamSettings: config.streamSettings ?? DEFAULT_STREAM_SETTINGS,
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
    async publish(subject, payload, msgId) {
      try {
        return await publisher.publish(subject, encoder.encode(JSON.stringify(payload)), msgId);
      } catch (error) {
        if (isStreamFull(error)) for (const listener of fullListeners) listener(subject);
        throw error;
      }
    },
    onStreamFull(listener) {
      fullListeners.push(listener);
    },
    async close() {
      publisher.close();
      if (nc.isClosed()) return;
      await nc.drain().catch(() => nc.close());
    },
  };
}
