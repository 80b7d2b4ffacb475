import { type ConsumerInfo, JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import type { Bus } from "./connection.js";
import { loadTopologyFile, resolveTopology, type Topology } from "./topology.js";

/** One consumer of a stream as an operator sees it: what waits, what is in hand, what came back. */
export interface ConsumerState {
  name: string;
  /** Null for a consumer of the whole stream. */
  filter_subject: string | null;
  /** Messages not delivered yet. */
  num_pending: number;
  /** Delivered and not acknowledged yet. */
  num_ack_pending: number;
  num_redelivered: number;
  /** Pull requests waiting for messages. */
  num_waiting: number;
  /** The latest delivery or acknowledgement (RFC 3339); null when the server does not say (nats-server < 2.10). */
  last_active: string | null;
}

/** One stream of the deployment and its consumers, sorted by name. */
export interface StreamState {
  name: string;
  subjects: string[];
  messages: number;
  bytes: number;
  first_seq: number;
  last_seq: number;
  /** The service's own (durable) consumers. */
  consumers: ConsumerState[];
  /**
   * Ephemeral consumers open on the stream: readers such as `notify dlq list`, the console's
   * dead-letter page or `nats stream view`, gone a few seconds after their reader stops.
   */
  ephemeral_consumers: number;
}

/** A time the server wrote as RFC 3339 text (nats-server 2.10+), or nothing usable. */
function instant(value: unknown): number | null {
  if (typeof value !== "string") return null;
  const ms = Date.parse(value);
  // The server's zero time (0001-01-01T00:00:00Z): never active.
  return Number.isNaN(ms) || ms <= 0 ? null : ms;
}

const consumerState = (info: ConsumerInfo): ConsumerState => {
  const times = [instant(info.delivered?.last_active), instant(info.ack_floor?.last_active)].filter(
    (t): t is number => t !== null,
  );
  return {
    name: info.name,
    filter_subject: info.config.filter_subject || null,
    num_pending: info.num_pending,
    num_ack_pending: info.num_ack_pending,
    num_redelivered: info.num_redelivered,
    num_waiting: info.num_waiting,
    last_active: times.length > 0 ? new Date(Math.max(...times)).toISOString() : null,
  };
};

/** The shipped topology, read once: an operator's page must not read a file on every request. */
let shipped: Topology | undefined;
const shippedTopology = () => {
  shipped ??= loadTopologyFile();
  return shipped;
};

/**
 * The streams of this deployment (the topology's, under the bus's namespace: never another
 * namespace's on a shared server), each with its consumers, sorted by name. A stream the
 * server lacks (the topology not applied yet) is left out. Reads stream info and the consumer
 * list only: nothing changes on the server.
 */
export async function describeStreams(bus: Bus, topology: Topology = shippedTopology()): Promise<StreamState[]> {
  const names = resolveTopology(topology, bus.naming)
    .streams.map((s) => s.name)
    .sort();
  const streams: StreamState[] = [];
  for (const name of names) {
    let info: Awaited<ReturnType<Bus["jsm"]["streams"]["info"]>>;
    try {
      info = await bus.jsm.streams.info(name);
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) continue;
      throw error;
    }
    const consumers: ConsumerState[] = [];
    let ephemeral = 0;
    for await (const consumer of bus.jsm.consumers.list(name)) {
      if (consumer.config.durable_name) consumers.push(consumerState(consumer));
      else ephemeral++;
    }
    consumers.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    streams.push({
      name,
      subjects: info.config.subjects ?? [],
      messages: info.state.messages,
      bytes: info.state.bytes,
      first_seq: info.state.first_seq,
      last_seq: info.state.last_seq,
      consumers,
      ephemeral_consumers: ephemeral,
    });
  }
  return streams;
}
