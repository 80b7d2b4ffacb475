import {
  AckPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { nanos } from "@nats-io/transport-node";
import type { Bus, BusConfig, TopologyMode } from "./connection.js";
import { type Role, requiredObjects } from "./nats-users.js";
import {
  type ConsumerDef,
  type KvDef,
  loadTopologyFile,
  resolveTopology,
  type StreamDef,
  type Topology,
} from "./topology.js";

/**
 * What the deployment's configuration says about its streams, applied when a stream or bucket
 * is created. A stream that exists keeps what it has (an operator may have raised its replicas
 * or limits with the nats CLI); only `force` makes an apply replace it with the declaration.
 */
export interface StreamSettings {
  /** Replicas of every stream and KV bucket created (1, or 3 or 5 on a cluster). */
  replicas: number;
  /** Limits replacing nats/topology.json's, by the stream's name there (NOTIFY_WORK, ...). */
  limits?: Record<string, { max_msgs?: number; max_bytes?: number }>;
  /** Replace an existing stream's settings with the declared ones (npm run nats:apply -- --force). */
  force?: boolean;
}

export const DEFAULT_STREAM_SETTINGS: StreamSettings = { replicas: 1 };

/** One line of an apply's report: created, updated (consumers), kept, or what differs. */
export interface AppliedRow {
  kind: "stream" | "kv" | "consumer";
  name: string;
  result: "created" | "updated" | "kept" | "forced" | "subjects added";
  /** Settings of an existing stream or bucket that differ from the declaration, left as they are. */
  drift?: string[];
}

const SECOND_NS = 1_000_000_000;

function streamConfig(
  def: StreamDef,
  settings: StreamSettings,
  declaredName: string,
): Partial<StreamConfig> & { name: string } {
  const limits = settings.limits?.[declaredName] ?? {};
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
    max_msgs: limits.max_msgs ?? def.max_msgs ?? -1,
    max_bytes: limits.max_bytes ?? def.max_bytes ?? -1,
    duplicate_window: def.duplicate_window_seconds * SECOND_NS,
    discard: def.discard === "old" ? DiscardPolicy.Old : DiscardPolicy.New,
    num_replicas: settings.replicas,
  };
}

/** The settings in which `actual` differs from `declared`, as "name actual (declared x)". */
function differences(actual: Partial<StreamConfig>, declared: Partial<StreamConfig>): string[] {
  const keys = ["num_replicas", "storage", "retention", "discard", "max_age", "max_msgs", "max_bytes"] as const;
  const shown = (key: string, value: unknown) =>
    key === "max_age" ? `${Number(value ?? 0) / SECOND_NS}s` : String(value ?? "unset");
  return keys
    .filter((key) => (actual[key] ?? null) !== (declared[key] ?? null))
    .map((key) => `${key} ${shown(key, actual[key])} (declared ${shown(key, declared[key])})`);
}

async function applyStream(
  jsm: JetStreamManager,
  def: StreamDef,
  declaredName: string,
  settings: StreamSettings,
): Promise<AppliedRow> {
  const config = streamConfig(def, settings, declaredName);
  const row = (result: AppliedRow["result"], drift?: string[]): AppliedRow => ({
    kind: "stream",
    name: def.name,
    result,
    ...(drift && drift.length > 0 ? { drift } : {}),
  });
  let existing = await jsm.streams.info(def.name).catch(() => null);
  if (existing === null) {
    existing = await createOrAdopt(
      () => jsm.streams.add(config),
      () => jsm.streams.info(def.name),
    );
    if (existing === null) return row("created");
  }
  const drift = differences(existing.config, config);
  if (settings.force) {
    // Retention and storage cannot change on a stream: those differences stay in the report.
    const { retention: _, storage: __, ...mutable } = config;
    await jsm.streams.update(def.name, { ...existing.config, ...mutable });
    return row(
      "forced",
      drift.filter((d) => d.startsWith("retention") || d.startsWith("storage")),
    );
  }
  // Subjects are the service's own: one it declares and the stream lacks is added, nothing else.
  const missing = def.subjects.filter((subject) => !existing.config.subjects?.includes(subject));
  if (missing.length > 0) {
    await jsm.streams.update(def.name, {
      ...existing.config,
      subjects: [...(existing.config.subjects ?? []), ...missing],
    });
    return row("subjects added", drift);
  }
  return row("kept", drift);
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

/** Consumers are the service's own (their ack wait is part of its promises): they follow the declaration. */
async function applyConsumer(jsm: JetStreamManager, def: ConsumerDef): Promise<AppliedRow> {
  const config = consumerConfig(def);
  const name = `${def.stream}/${def.durable}`;
  const existing = await jsm.consumers.info(def.stream, def.durable).catch(() => null);
  if (existing === null) {
    const adopted = await createOrAdopt(
      () => jsm.consumers.add(def.stream, config),
      () => jsm.consumers.info(def.stream, def.durable),
    );
    if (adopted === null) return { kind: "consumer", name, result: "created" };
  }
  const { durable_name: _, filter_subject: __, ...mutable } = config;
  await jsm.consumers.update(def.stream, def.durable, mutable);
  return { kind: "consumer", name, result: "updated" };
}

async function applyKv(
  jsm: JetStreamManager,
  js: JetStreamClient,
  def: KvDef,
  settings: StreamSettings,
): Promise<AppliedRow> {
  const stream = `KV_${def.bucket}`;
  let existing = await jsm.streams.info(stream).catch(() => null);
  if (existing === null) {
    existing = await createOrAdopt(
      () =>
        new Kvm(js).create(def.bucket, {
          description: def.description,
          ttl: def.ttl_seconds * 1000,
          history: def.history,
          storage: def.storage === "file" ? StorageType.File : StorageType.Memory,
          replicas: settings.replicas,
        }),
      () => jsm.streams.info(stream),
    );
    if (existing === null) return { kind: "kv", name: def.bucket, result: "created" };
  }
  const replicas = existing.config.num_replicas;
  const drift = replicas === settings.replicas ? [] : [`num_replicas ${replicas} (declared ${settings.replicas})`];
  if (settings.force && drift.length > 0) {
    await jsm.streams.update(existing.config.name, { ...existing.config, num_replicas: settings.replicas });
    return { kind: "kv", name: def.bucket, result: "forced" };
  }
  return { kind: "kv", name: def.bucket, result: "kept", ...(drift.length > 0 ? { drift } : {}) };
}

/**
 * Creates a stream, bucket or consumer that was missing a moment ago: null when this call made
 * it, or what another caller made in the meantime. Apps starting together race to create the
 * same things, and nats-server 2.9 may answer the loser with an error ("subjects overlap with an
 * existing stream") instead of the idempotent success a later call gets; the loser then adopts
 * what the winner made. An error with nothing to adopt is the real failure and is thrown.
 */
async function createOrAdopt<T>(create: () => Promise<unknown>, read: () => Promise<T>): Promise<T | null> {
  try {
    await create();
    return null;
  } catch (error) {
    const made = await read().catch(() => null);
    if (made === null) throw error;
    return made;
  }
}

/**
 * Creates what the topology declares and is missing. Idempotent: safe at every app start and
 * from several processes at once. Existing streams and buckets keep their settings (the report
 * says where they differ from the declaration) unless the bus's settings say `force`; consumers
 * follow the declaration.
 */
export async function applyTopology(
  bus: Pick<Bus, "jsm" | "js" | "naming" | "streamSettings">,
  topology: Topology = loadTopologyFile(),
): Promise<AppliedRow[]> {
  const settings = bus.streamSettings;
  const resolved = resolveTopology(topology, bus.naming);
  const report: AppliedRow[] = [];
  for (const [index, def] of resolved.streams.entries()) {
    report.push(await applyStream(bus.jsm, def, topology.streams[index]?.name ?? def.name, settings));
  }
  for (const def of resolved.kv) report.push(await applyKv(bus.jsm, bus.js, def, settings));
  for (const def of resolved.consumers) report.push(await applyConsumer(bus.jsm, def));
  return report;
}

/** What a role uses and the server does not have: the start waits for the setup job to create it. */
export class TopologyMissingError extends Error {
  override name = "TopologyMissingError";
  readonly missing: string[];
  constructor(missing: string[]) {
    super(`missing on the NATS server: ${missing.join(", ")} (the setup job creates them: npm run nats:apply)`);
    this.missing = missing;
  }
}

/**
 * Checks, without creating anything, that the streams, consumers and buckets the bus's role
 * uses exist (all of the topology's when it has no role). Throws TopologyMissingError naming
 * what is missing; any other error (a permission refused, the server away) as it came.
 */
export async function verifyTopology(
  bus: Pick<Bus, "jsm" | "naming" | "role">,
  topology: Topology = loadTopologyFile(),
): Promise<void> {
  const needed: { streams: string[]; consumers: Array<{ stream: string; durable: string }>; buckets: string[] } =
    bus.role === undefined
      ? (() => {
          const resolved = resolveTopology(topology, bus.naming);
          return {
            streams: resolved.streams.map((s) => s.name),
            consumers: resolved.consumers.map((c) => ({ stream: c.stream, durable: c.durable })),
            buckets: resolved.kv.map((k) => k.bucket),
          };
        })()
      : requiredObjects(bus.role, topology, bus.naming);
  const missing: string[] = [];
  const absent = (error: unknown) => {
    const code = error instanceof JetStreamApiError ? error.code : undefined;
    if (code === JetStreamApiCodes.StreamNotFound || code === JetStreamApiCodes.ConsumerNotFound) return true;
    throw error;
  };
  for (const name of [...needed.streams, ...needed.buckets.map((b) => `KV_${b}`)]) {
    await bus.jsm.streams.info(name).catch((error) => absent(error) && missing.push(`stream ${name}`));
  }
  for (const { stream, durable } of needed.consumers) {
    if (missing.includes(`stream ${stream}`)) continue;
    await bus.jsm.consumers
      .info(stream, durable)
      .catch((error) => absent(error) && missing.push(`consumer ${stream}/${durable}`));
  }
  if (missing.length > 0) throw new TopologyMissingError(missing);
}

/** What a start does about the topology in the bus's mode: apply it, or check that it is there. */
export async function ensureTopology(
  bus: Pick<Bus, "jsm" | "js" | "naming" | "streamSettings" | "role" | "topologyMode">,
  topology: Topology = loadTopologyFile(),
): Promise<AppliedRow[]> {
  if (bus.topologyMode === "apply") return applyTopology(bus, topology);
  await verifyTopology(bus, topology);
  return [];
}

/**
 * Connection settings of an app from its configuration: the servers, its role's user and inbox,
 * the namespace and partitions, and what it does about the topology at start.
 */
export function busConfigFrom(
  config: {
    NATS_URL: string;
    NATS_USER?: string | undefined;
    NATS_PASSWORD?: string | undefined;
    NATS_TOPOLOGY: TopologyMode;
    NATS_NAMESPACE: string;
    LANE_PARTITIONS: number;
  } & Parameters<typeof streamSettingsFrom>[0],
  role: Role,
): BusConfig {
  return {
    servers: config.NATS_URL,
    name: `notify-${role}`,
    role,
    ...(config.NATS_USER ? { user: config.NATS_USER, password: config.NATS_PASSWORD ?? "" } : {}),
    topology: config.NATS_TOPOLOGY,
    namespace: config.NATS_NAMESPACE,
    partitions: config.LANE_PARTITIONS,
    streamSettings: streamSettingsFrom(config),
  };
}

/** Stream settings from the apps' configuration; a limit left unset keeps nats/topology.json's. */
export function streamSettingsFrom(config: {
  NATS_REPLICAS: number;
  NATS_LANE_MAX_MSGS?: number | undefined;
  NATS_LANE_MAX_BYTES?: number | undefined;
  NATS_WORK_MAX_MSGS?: number | undefined;
  NATS_WORK_MAX_BYTES?: number | undefined;
}): StreamSettings {
  const limit = (max_msgs?: number, max_bytes?: number) => ({
    ...(max_msgs === undefined ? {} : { max_msgs }),
    ...(max_bytes === undefined ? {} : { max_bytes }),
  });
  const lane = limit(config.NATS_LANE_MAX_MSGS, config.NATS_LANE_MAX_BYTES);
  return {
    replicas: config.NATS_REPLICAS,
    limits: {
      NOTIFY_LANE_TRANSACTIONAL: lane,
      NOTIFY_LANE_PROMOTIONAL: lane,
      NOTIFY_WORK: limit(config.NATS_WORK_MAX_MSGS, config.NATS_WORK_MAX_BYTES),
    },
  };
}
