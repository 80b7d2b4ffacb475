import { setTimeout as sleep } from "node:timers/promises";
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { connect, type NatsConnection, TimeoutError } from "@nats-io/transport-node";
import type { Channel, Priority } from "@notify/core";
import { DEFAULT_STREAM_SETTINGS, ensureTopology, type StreamSettings } from "./apply.js";
import { isStreamFull } from "./errors.js";
import { type BucketEvent, bucketRepair } from "./kv-views.js";
import { jsonBytes } from "./nats-client.js";
import { inboxPrefix, type Role } from "./nats-users.js";
import { createPublisher } from "./publisher.js";
import { bucketName, type Naming, streamName, subjectName } from "./topology.js";

export type { JsMsg, KV, NatsConnection };

export interface BusConfig extends Naming {
  servers: string;
  /** Connection name shown by `nats server report connections`. */
  name: string;
  /**
   * Who connects: replies arrive under the role's own inbox prefix (`_INBOX.<role>`), so a NATS
   * user per role may subscribe to its own replies and no one else's.
   */
  role?: Role;
  /** NATS user and password (a server with one user per role; see nats/README.md). */
  user?: string;
  password?: string;
  /**
   * "apply": create what the topology declares and is missing (one server, development);
   * "verify": the role may not create anything (least-privilege users), so it waits until what
   * it uses exists, applied by the setup job.
   */
  topology?: TopologyMode;
  /** Publish acknowledgement timeout: how long ingest waits before answering 503. */
  publishTimeoutMs?: number;
  /**
   * Wait for a first connection instead of failing when NATS is down at start, and then for
   * JetStream to answer when it times out or is temporarily unavailable (a server just restarted,
   * a cluster electing its leader).
   */
  waitOnFirstConnect?: boolean;
  /** Replicas and limits of the streams and buckets this process creates (applyTopology). */
  streamSettings?: StreamSettings;
}

export type TopologyMode = "apply" | "verify";

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  naming: Naming;
  streamSettings: StreamSettings;
  role: Role | undefined;
  topologyMode: TopologyMode;
  /** False while the connection is down: publishers answer 503 at once instead of waiting. */
  isConnected(): boolean;
  subjects: {
    lane(priority: Priority, partition: number): string;
    work(channel: Channel, priority: Priority): string;
    dlq(channel: Channel): string;
    /**
     * Core NATS (no stream): ingest asks the processor for the dead letters' page (opsDlqList),
     * one letter (opsDlqShow) and a replay (opsReplay); ingest's own user reads no stream. It
     * asks for a notification's cancel (opsCancel) too: the processor holds the send guard.
     */
    opsDlqList: string;
    opsDlqShow: string;
    opsReplay: string;
    opsCancel: string;
    /** One attempt of an outbound webhook delivery, for a sender (stream NOTIFY_WEBHOOKS). */
    webhooks: string;
  };
  streams: { lane(priority: Priority): string; work: string; dlq: string; webhooks: string };
  /**
   * A view of a KV bucket. When an operation finds the bucket's stream gone (a nats-server
   * restart loses memory buckets; an operator may delete one), the declared topology is put back
   * as at start (ensureTopology) and the operation tried once more; where that cannot be done
   * (NATS_TOPOLOGY=verify waits for the setup job), it fails with BucketMissingError, at once
   * until the next attempt is due (see bucketRepair).
   */
  kv(bucket: "notify_send_guard" | "notify_rate" | "notify_leases" | "notify_breakers" | "notify_workers"): Promise<KV>;
  publish(subject: string, payload: unknown, msgId: string): Promise<{ seq: number; duplicate: boolean }>;
  /**
   * Called for each publish a full stream refused (its limit reached, discard new): the work was
   * not stored and its caller was told so. Apps count these in an alert metric.
   */
  onStreamFull(listener: (subject: string) => void): void;
  /** Called when a KV bucket was found gone: put back, or not yet (once, not per operation). Apps log these. */
  onBucketEvent(listener: (event: BucketEvent) => void): void;
  close(): Promise<void>;
}

/** JetStream did not answer in time, or answered that it is not available for now. */
const jetStreamAway = (error: unknown) =>
  error instanceof TimeoutError || (error instanceof JetStreamApiError && error.status === 503);

async function managerOf(nc: NatsConnection, wait: boolean): Promise<JetStreamManager> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await jetstreamManager(nc, { timeout: 5000 });
    } catch (error) {
      if (!wait || nc.isClosed() || !jetStreamAway(error)) throw error;
      await sleep(Math.min(5000, 250 * 2 ** attempt));
    }
  }
}

export async function connectBus(config: BusConfig): Promise<Bus> {
  const nc = await connect({
    servers: config.servers.split(",").map((s) => s.trim()),
    name: config.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: config.waitOnFirstConnect ?? false,
    timeout: 3000,
    // No Error object (and its stack trace) made up front for every request and JetStream call in
    // case it fails: a busy app makes thousands of calls a second. Errors still say what failed.
    noAsyncTraces: true,
    ...(config.role ? { inboxPrefix: inboxPrefix(config.role) } : {}),
    ...(config.user ? { user: config.user, pass: config.password ?? "" } : {}),
  });
  let connected = true;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") connected = false;
      if (status.type === "reconnect") connected = true;
    }
  })();
  // A server without JetStream yet (a cluster still electing its leader) fails this: the
  // connection must not outlive the failure, or its reconnect timers keep the process alive. An
  // app that waits for NATS at start waits for that too; JetStream not enabled at all is a
  // configuration to fix, and fails at once.
  const jsm = await managerOf(nc, config.waitOnFirstConnect === true).catch(async (error: unknown) => {
    await nc.close().catch(() => {});
    throw error;
  });
  const js = jetstream(nc, { timeout: config.publishTimeoutMs ?? 3000 });
  const kvm = new Kvm(js);
  const publisher = createPublisher(nc, config.publishTimeoutMs ?? 3000, config.role && inboxPrefix(config.role));
  const buckets = new Map<string, Promise<KV>>();
  const naming: Naming = { namespace: config.namespace, partitions: config.partitions };
  const fullListeners: Array<(subject: string) => void> = [];
  const bucketListeners: Array<(event: BucketEvent) => void> = [];
  const repair = bucketRepair({
    restore: () => ensureTopology(bus),
    streamExists: (stream) =>
      jsm.streams.info(stream).then(
        () => true,
        (error: unknown) => {
          if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return false;
          throw error;
        },
      ),
    onEvent: (event) => {
      for (const listener of bucketListeners) listener(event);
    },
  });
  const bus: Bus = {
    nc,
    js,
    jsm,
    naming,
    streamSettings: config.streamSettings ?? DEFAULT_STREAM_SETTINGS,
    role: config.role,
    topologyMode: config.topology ?? "apply",
    isConnected: () => connected && !nc.isClosed(),
    subjects: {
      lane: (priority, partition) => subjectName(naming, `notify.lane.${priority}.${partition}`),
      work: (channel, priority) => subjectName(naming, `notify.work.${channel}.${priority}`),
      dlq: (channel) => subjectName(naming, `notify.dlq.${channel}`),
      opsDlqList: subjectName(naming, "notify.ops.dlq.list"),
      opsDlqShow: subjectName(naming, "notify.ops.dlq.show"),
      opsReplay: subjectName(naming, "notify.ops.replay"),
      opsCancel: subjectName(naming, "notify.ops.cancel"),
      webhooks: subjectName(naming, "notify.webhooks.deliver"),
    },
    streams: {
      lane: (priority) =>
        streamName(naming, priority === "transactional" ? "NOTIFY_LANE_TRANSACTIONAL" : "NOTIFY_LANE_PROMOTIONAL"),
      work: streamName(naming, "NOTIFY_WORK"),
      dlq: streamName(naming, "NOTIFY_DLQ"),
      webhooks: streamName(naming, "NOTIFY_WEBHOOKS"),
    },
    kv(bucket) {
      const name = bucketName(naming, bucket);
      let kv = buckets.get(name);
      if (!kv) {
        kv = kvm.open(name).then((opened) => repair.view(name, opened));
        buckets.set(name, kv);
      }
      return kv;
    },
    async publish(subject, payload, msgId) {
      try {
        return await publisher.publish(subject, jsonBytes(payload), msgId);
      } catch (error) {
        if (isStreamFull(error)) for (const listener of fullListeners) listener(subject);
        throw error;
      }
    },
    onStreamFull(listener) {
      fullListeners.push(listener);
    },
    onBucketEvent(listener) {
      bucketListeners.push(listener);
    },
    async close() {
      publisher.close();
      if (nc.isClosed()) return;
      await nc.drain().catch(() => nc.close());
    },
  };
  return bus;
}
