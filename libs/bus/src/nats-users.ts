import { bucketName, type Naming, resolveTopology, streamName, subjectName, type Topology } from "./topology.js";

/**
 * Who connects to NATS, each as a user of its own: the four apps, the setup job that applies the
 * topology, and the operator's `notify` CLI.
 */
export const ROLES = ["setup", "ingest", "processor", "workers", "receipts", "operator"] as const;
export type Role = (typeof ROLES)[number];

/**
 * What a role does on the bus, in the topology's declared names (before a namespace). The
 * server permissions (permissionsFor) and the start-up check of the topology (a role that may
 * not create streams waits until they are there) are both derived from it, so the two cannot
 * disagree.
 */
export interface RoleAccess {
  /** What it is for, written into the server configuration. */
  purpose: string;
  /** Stream subjects it publishes to, as [stream, subject]. */
  publishes: Array<[stream: string, subject: string]>;
  /**
   * Streams whose durable consumers it pulls from and acknowledges (every consumer declared on
   * them); a message none can decode is set aside on that stream's poison subject.
   */
  pulls: string[];
  /** Streams it reads without consuming, through an ordered (ephemeral) consumer. */
  browses: string[];
  /** Streams it reads single stored messages of, by sequence or by subject (message get). */
  gets: string[];
  /** KV buckets it reads and writes. */
  kv: string[];
  /** KV buckets it only reads (a key by name, and the list of keys from the bucket's stream info). */
  reads?: string[];
  /** Streams whose state and consumers it reads (stream info, consumer list): the operator's view. */
  inspects?: string[];
  /** Core subjects (no stream) it announces on, and hears. */
  announces?: string[];
  hears?: string[];
  /** Core request subjects it asks on (request-reply), and those it answers (in a queue group). */
  asks?: string[];
  answers?: string[];
  /** The whole JetStream API: creates and changes streams, consumers and buckets. */
  manages?: boolean;
}

const LANES = ["NOTIFY_LANE_TRANSACTIONAL", "NOTIFY_LANE_PROMOTIONAL"];
const none = { publishes: [], pulls: [], browses: [], gets: [], kv: [] };

export const ROLE_ACCESS: Record<Role, RoleAccess> = {
  setup: {
    ...none,
    purpose:
      "applies nats/topology.json (npm run nats:apply, compose's nats-setup): the only user that creates or changes streams, consumers and buckets",
    manages: true,
  },
  ingest: {
    ...none,
    purpose:
      "publishes accepted notifications to the lanes; asks the processor for the dead letters (GET /api/v1/dead-letters and /dead-letters/{seq}, on notify.ops.dlq.list and notify.ops.dlq.show) and their replays (POST /api/v1/dead-letters/replay, on notify.ops.replay), and the cancel of a notification (POST /api/v1/notifications/{id}/cancel, on notify.ops.cancel): it reads no stream and creates no consumer, holds no work item and no send guard; announces and hears key revocations and template changes, announces changes of users' preferences and contacts; reads the streams' state, the workers' reports, breaker decisions and token buckets for the operator's routes",
    publishes: [
      ["NOTIFY_LANE_TRANSACTIONAL", "notify.lane.transactional.*"],
      ["NOTIFY_LANE_PROMOTIONAL", "notify.lane.promotional.*"],
    ],
    reads: ["notify_workers", "notify_breakers", "notify_rate"],
    inspects: [...LANES, "NOTIFY_WORK", "NOTIFY_DLQ", "NOTIFY_WEBHOOKS"],
    // Key revocations and rotations, template versions, users' preferences and contacts: every
    // instance drops what it cached at once.
    announces: ["notify.events.keys", "notify.events.templates", "notify.events.profiles"],
    hears: ["notify.events.keys", "notify.events.templates"],
    // The processor reads the dead letters for it: whoever may create a consumer on a stream may
    // give it any deliver subject (the server does not check it against the creator's publish
    // permissions), so ingest's user may create none.
    asks: ["notify.ops.dlq.list", "notify.ops.dlq.show", "notify.ops.replay", "notify.ops.cancel"],
  },
  processor: {
    ...none,
    purpose:
      "pulls the lanes, publishes work items, broadcast recipients and outbound webhook attempts, hears template and user profile changes; its reconciler looks up the oldest stored message of a subject; answers ingest's dead-letter reads and replays (notify.ops.dlq.list, notify.ops.dlq.show, notify.ops.replay: reads dead letters, checks and resets the send guard, republishes work items) and its cancels (notify.ops.cancel: takes the send guard of each channel not sent yet)",
    publishes: [
      ["NOTIFY_WORK", "notify.work.*.*"],
      ["NOTIFY_LANE_PROMOTIONAL", "notify.lane.promotional.*"],
      ["NOTIFY_WEBHOOKS", "notify.webhooks.deliver"],
    ],
    pulls: LANES,
    browses: ["NOTIFY_DLQ"],
    gets: [...LANES, "NOTIFY_WORK", "NOTIFY_DLQ"],
    kv: ["notify_leases", "notify_send_guard"],
    hears: ["notify.events.templates", "notify.events.profiles"],
    answers: ["notify.ops.dlq.list", "notify.ops.dlq.show", "notify.ops.replay", "notify.ops.cancel"],
  },
  workers: {
    ...none,
    purpose:
      "pulls work items and outbound webhook attempts, claims the send guard, shares the providers' token buckets and breaker decisions, publishes dead letters, reports its providers to notify_workers",
    publishes: [["NOTIFY_DLQ", "notify.dlq.*"]],
    pulls: ["NOTIFY_WORK", "NOTIFY_WEBHOOKS"],
    kv: ["notify_send_guard", "notify_rate", "notify_breakers", "notify_workers"],
  },
  receipts: {
    ...none,
    purpose: "no stream access: reports the connection in its readiness",
  },
  operator: {
    ...none,
    purpose:
      "the notify CLI: reads dead letters and poison messages, replays dead letters to the work stream (checking the send guard), announces key revocations",
    publishes: [["NOTIFY_WORK", "notify.work.*.*"]],
    announces: ["notify.events.keys"],
    browses: ["NOTIFY_DLQ"],
    gets: ["NOTIFY_DLQ"],
    kv: ["notify_send_guard"],
  },
};

/** The inbox prefix of a role: its replies arrive under it, and it may subscribe to nothing else. */
export const inboxPrefix = (role: Role) => `_INBOX.${role}`;

/** A role's streams (declared names): those it publishes to, pulls, browses or reads from. */
export function streamsOf(access: RoleAccess): string[] {
  const poison = access.pulls.length > 0 ? ["NOTIFY_DLQ"] : [];
  return [
    ...new Set([
      ...access.publishes.map(([stream]) => stream),
      ...access.pulls,
      ...access.browses,
      ...access.gets,
      ...poison,
    ]),
  ];
}

export interface Permissions {
  publish: string[];
  subscribe: string[];
  /** It may publish a reply to a request it received (and only then): a role that answers requests. */
  allowResponses: boolean;
}

/**
 * The subjects a role may publish and subscribe to, under a namespace: nothing else. The
 * JetStream API is one subject per operation and object, so each grant names its stream.
 */
export function permissionsFor(role: Role, naming: Pick<Naming, "namespace">): Permissions {
  const access = ROLE_ACCESS[role];
  const stream = (name: string) => streamName({ ...naming, partitions: 1 }, name);
  const subject = (name: string) => subjectName({ ...naming, partitions: 1 }, name);
  const publish: string[] = ["$JS.API.INFO"];
  if (access.manages) publish.push("$JS.API.>");
  for (const name of streamsOf(access)) publish.push(`$JS.API.STREAM.INFO.${stream(name)}`);
  for (const [, name] of access.publishes) publish.push(subject(name));
  for (const name of access.pulls) {
    const s = stream(name);
    publish.push(
      `$JS.API.CONSUMER.INFO.${s}.*`,
      `$JS.API.CONSUMER.MSG.NEXT.${s}.*`,
      `$JS.ACK.${s}.>`,
      subject(`notify.dlq.poison.${s}`),
    );
  }
  for (const name of access.browses) {
    const s = stream(name);
    publish.push(
      `$JS.API.CONSUMER.CREATE.${s}.>`,
      `$JS.API.CONSUMER.INFO.${s}.*`,
      `$JS.API.CONSUMER.MSG.NEXT.${s}.*`,
      `$JS.API.CONSUMER.DELETE.${s}.*`,
    );
  }
  for (const name of access.gets) publish.push(`$JS.API.STREAM.MSG.GET.${stream(name)}`);
  for (const name of access.kv) {
    const bucket = bucketName({ ...naming, partitions: 1 }, name);
    // A read is a direct get or a message get, as the client chooses; a write is a publish.
    publish.push(
      `$JS.API.STREAM.INFO.KV_${bucket}`,
      `$JS.API.DIRECT.GET.KV_${bucket}.>`,
      `$JS.API.STREAM.MSG.GET.KV_${bucket}`,
      `$KV.${bucket}.>`,
    );
  }
  for (const name of access.reads ?? []) {
    const bucket = bucketName({ ...naming, partitions: 1 }, name);
    publish.push(
      `$JS.API.STREAM.INFO.KV_${bucket}`,
      `$JS.API.DIRECT.GET.KV_${bucket}.>`,
      `$JS.API.STREAM.MSG.GET.KV_${bucket}`,
    );
  }
  for (const name of access.inspects ?? []) {
    const s = stream(name);
    publish.push(`$JS.API.STREAM.INFO.${s}`, `$JS.API.CONSUMER.LIST.${s}`);
  }
  for (const name of access.announces ?? []) publish.push(subject(name));
  for (const name of access.asks ?? []) publish.push(subject(name));
  const subscribe = [
    `${inboxPrefix(role)}.>`,
    ...(access.hears ?? []).map(subject),
    ...(access.answers ?? []).map(subject),
  ];
  return {
    publish: [...new Set(publish)],
    subscribe,
    allowResponses: (access.answers ?? []).length > 0,
  };
}

/** What a role checks at start when it may not create the topology: its streams, consumers and buckets. */
export function requiredObjects(
  role: Role,
  topology: Topology,
  naming: Naming,
): { streams: string[]; consumers: Array<{ stream: string; durable: string }>; buckets: string[] } {
  const access = ROLE_ACCESS[role];
  const resolved = resolveTopology(topology, naming);
  const pulled = new Set(access.pulls.map((name) => streamName(naming, name)));
  return {
    streams: streamsOf(access).map((name) => streamName(naming, name)),
    consumers: resolved.consumers
      .filter((c) => pulled.has(c.stream))
      .map((c) => ({ stream: c.stream, durable: c.durable })),
    buckets: access.kv.map((name) => bucketName(naming, name)),
  };
}

/** A NATS subject pattern match: `*` is one token, `>` one or more at the end. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i;
    if (i >= s.length || (p[i] !== "*" && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

/** The server's environment variable holding a role's password. */
export const passwordVariable = (role: Role) => `NATS_${role.toUpperCase()}_PASSWORD`;
