import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CHANNELS, PRIORITIES } from "@notify/core";

export interface StreamDef {
  name: string;
  description: string;
  subjects: string[];
  retention: "workqueue" | "limits" | "interest";
  storage: "file" | "memory";
  /** 0: kept until consumed, however old. */
  max_age_seconds: number;
  /** Messages held at most (-1 or absent: no limit); with discard "new" a full stream refuses. */
  max_msgs?: number;
  max_bytes?: number;
  duplicate_window_seconds: number;
  discard: "old" | "new";
}
export interface ConsumerDef {
  stream: string;
  durable: string;
  description: string;
  filter_subject: string;
  ack_wait_seconds: number;
  max_ack_pending: number;
  max_deliver: number;
}
export interface KvDef {
  bucket: string;
  description: string;
  ttl_seconds: number;
  history: number;
  storage: "file" | "memory";
}
export interface Topology {
  streams: StreamDef[];
  consumers: ConsumerDef[];
  kv: KvDef[];
}

/** nats/topology.json at the repository root: the data every app applies at start. */
export const TOPOLOGY_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "nats", "topology.json");

export function loadTopologyFile(file = TOPOLOGY_FILE): Topology {
  return JSON.parse(readFileSync(file, "utf8")) as Topology;
}

export interface Naming {
  /** Prefix for streams, subjects and buckets; "" in production. */
  namespace: string;
  partitions: number;
}

export const streamName = (n: Naming, name: string) => (n.namespace ? `${n.namespace.toUpperCase()}_${name}` : name);
export const subjectName = (n: Naming, subject: string) => (n.namespace ? `${n.namespace}.${subject}` : subject);
export const bucketName = (n: Naming, bucket: string) => (n.namespace ? `${n.namespace}_${bucket}` : bucket);

const expand = (text: string, vars: Record<string, string>) =>
  text.replace(/\{(\w+)\}/g, (whole, key: string) => vars[key] ?? whole);

/**
 * Resolves the definitions for a namespace and partition count: names prefixed, templated
 * consumers expanded once per partition, channel and lane.
 */
export function resolveTopology(topology: Topology, n: Naming): Topology {
  const partitions = Array.from({ length: n.partitions }, (_, i) => String(i));
  const consumers: ConsumerDef[] = [];
  for (const def of topology.consumers) {
    const text = JSON.stringify(def);
    const axes: Array<[string, readonly string[]]> = [];
    if (text.includes("{partition}")) axes.push(["partition", partitions]);
    if (text.includes("{channel}")) axes.push(["channel", CHANNELS]);
    if (text.includes("{lane}")) axes.push(["lane", PRIORITIES]);
    let combos: Record<string, string>[] = [{}];
    for (const [axis, values] of axes) combos = combos.flatMap((c) => values.map((value) => ({ ...c, [axis]: value })));
    for (const vars of combos) {
      consumers.push({
        ...def,
        stream: streamName(n, def.stream),
        durable: expand(def.durable, vars),
        description: expand(def.description, vars),
        filter_subject: subjectName(n, expand(def.filter_subject, vars)),
      });
    }
  }
  return {
    streams: topology.streams.map((s) => ({
      ...s,
      name: streamName(n, s.name),
      subjects: s.subjects.map((subject) => subjectName(n, subject)),
    })),
    consumers,
    kv: topology.kv.map((k) => ({ ...k, bucket: bucketName(n, k.bucket) })),
  };
}
