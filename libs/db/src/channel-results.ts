import {
  type Channel,
  type ChannelStatus,
  type DeadLetterAttempt,
  type DeadLetterNotification,
  statusesMovableTo,
} from "@notify/core";
import type { PendingQuery, Row, TransactionSql } from "postgres";
import { GATHER, perIterationOf, unnestColumns } from "./batch.js";
import type { Database, Sql } from "./pool.js";
import type { RowPick } from "./rows.js";
import type { notificationChannels } from "./schema/index.js";

/** The channel of one notification, as a worker or the processor names it. */
export interface ChannelRef {
  notification_id: string;
  channel: Channel;
}

/** One channel's outcome as routing decided it. */
export interface RoutedChannel {
  channel: Channel;
  status: ChannelStatus;
  reason: string | null;
  nextAttemptAt: Date | null;
}

/** The daily promotional cap a routing counts against, when it does. */
export interface CapSlot {
  userId: string;
  day: string;
  cap: number;
}

/**
 * How far back the user's previous notification is looked for: one older than this and still
 * unrouted is not on its way back (the reconciler routes what the lane lost), and the walk back
 * through the user's notifications of other lanes and clients stays bounded.
 */
const ORDER_LOOKBACK = "1 hour";

/** Orders by a string key (any fixed order does: it only has to be the same everywhere). */
const byKey =
  <T>(key: (item: T) => string) =>
  (a: T, b: T): number => {
    const x = key(a);
    const y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };

const refKey = (ref: ChannelRef) => `${ref.notification_id}\u0000${ref.channel}`;

/** What recording a routing did. */
export interface RoutingRecord {
  /** This run wrote the channel rows (false: an earlier run did, or `held`). */
  first: boolean;
  /** Over the daily cap: the channels that would be sent were suppressed with reason rate_cap. */
  capped: boolean;
  /** Nothing was written: the user's previous notification in the lane is not routed yet. */
  held: boolean;
  /** That previous notification, when it was looked for and is still unrouted (held or not). */
  earlier: string | null;
}

/** One notification's routing, as recordRoutedChannels takes it. */
export interface Routing {
  notificationId: string;
  clientId: string;
  userId: string;
  priority: string;
  channels: readonly RoutedChannel[];
  deferredUntil: Date | null;
  cap: CapSlot | null;
  order?: "hold" | "report";
}

/**
 * For each notification of `notifications` (rows of id, user_id, client_id, priority), the user's
 * previous one in its client and lane when that one has no channel rows yet, as (id, earlier):
 * the latest created before it, within ORDER_LOOKBACK (any of them when several share that time).
 * A notification whose previous one is routed, or that has none, has no row.
 */
const previousUnrouted = (sql: Sql | TransactionSql, notifications: PendingQuery<Row[]>) => sql`
  select n.id, w.id as earlier
  from (${notifications}) n
  cross join lateral (
    select p.id from notifications p
    where p.user_id = n.user_id and p.client_id = n.client_id and p.priority = n.priority
      and p.created_at = (
        select max(created_at) from notifications
        where user_id = n.user_id and client_id = n.client_id and priority = n.priority
          and created_at < (select created_at from notifications where id = n.id)
          and created_at >= (select created_at from notifications where id = n.id) - ${ORDER_LOOKBACK}::interval)
      and not exists (select 1 from notification_channels c where c.notification_id = p.id)
    limit 1
  ) w`;

/**
 * The routings without a cap of one batch in one statement: for each notification not routed
 * before (and, with `order: "hold"`, whose user's previous notification in the lane is routed),
 * its channel rows and its deferral timer; answers what happened to each. The previous
 * notification is looked for as `earlier` describes, per routing with `order`.
 */
async function routeMany(database: Database, asked: readonly Routing[]): Promise<RoutingRecord[]> {
  const { sql } = database;
  // In one order whoever sends them, so two batches over the same notifications lock them alike.
  const routings = [...asked].sort(byKey((r) => r.notificationId));
  const of = <T>(pick: (r: Routing) => T) => routings.map(pick);
  const planned = routings.flatMap((r) => r.channels.map((p) => ({ id: r.notificationId, ...p })));
  const plan = <T>(pick: (p: (typeof planned)[number]) => T) => planned.map(pick);
  const input = unnestColumns(sql, "n", {
    id: ["text", of((r) => r.notificationId)],
    user_id: ["text", of((r) => r.userId)],
    client_id: ["text", of((r) => r.clientId)],
    priority: ["text", of((r) => r.priority)],
    order_mode: ["text", of((r) => r.order ?? null)],
    deferred_until: ["timestamptz", of((r) => r.deferredUntil?.toISOString() ?? null)],
  });
  const channels = unnestColumns(sql, "d", {
    id: ["text", plan((p) => p.id)],
    channel: ["text", plan((p) => p.channel)],
    status: ["text", plan((p) => p.status)],
    reason: ["text", plan((p) => p.reason)],
    next_attempt_at: ["timestamptz", plan((p) => p.nextAttemptAt?.toISOString() ?? null)],
  });
  const rows = await sql<{ id: string; inserted: number; routed: boolean; earlier: string | null }[]>`
    with input as (
      select * from ${input}
    ), planned as (
      select * from ${channels}
    ), routed as (
      select distinct notification_id as id from notification_channels where notification_id in (select id from input)
    ), waiting as (
      ${previousUnrouted(sql, sql`select id, user_id, client_id, priority from input where order_mode is not null`)}
    ), inserted as (
      insert into notification_channels (notification_id, channel, status, reason, next_attempt_at, routed_status, routed_reason)
      select d.id, d.channel, d.status, d.reason, d.next_attempt_at, d.status, d.reason
      from planned d join input n on n.id = d.id
      where d.id not in (select id from routed)
        and not (n.order_mode = 'hold' and d.id in (select id from waiting))
      on conflict (notification_id, channel) do nothing
      returning notification_id
    ), timer as (
      insert into deferred_notifications (notification_id, user_id, due_at)
      select n.id, n.user_id, n.deferred_until from input n
      where n.deferred_until is not null and n.id in (select notification_id from inserted)
      on conflict (notification_id) do nothing
    )
    -- Joined, not looked up per row: a subquery per row would scan the batch's rows once each.
    select n.id, coalesce(i.inserted, 0) as inserted, n.id in (select id from routed) as routed, w.earlier
    from input n
    left join (select notification_id, count(*)::int as inserted from inserted group by notification_id) i
      on i.notification_id = n.id
    left join waiting w on w.id = n.id`;
  const byId = new Map(rows.map((row) => [row.id, row]));
  return asked.map((routing) => {
    const row = byId.get(routing.notificationId);
    const first = (row?.inserted ?? 0) > 0;
    const earlier = row?.earlier ?? null;
    const held = routing.order === "hold" && !first && !row?.routed && earlier !== null;
    return { first, capped: false, held, earlier };
  });
}

/**
 * Routings of one event-loop iteration on one database go in one statement; two of one user's
 * lane (or of one notification) never share one, so each sees the other as it would in turn.
 */
const routeBatched = perIterationOf(routeMany, {
  writes: (r) => `${r.clientId}\u0000${r.userId}\u0000${r.priority}`,
  ...GATHER,
});

/**
 * Writes the channel outcomes of a routing, and the deferral timer with them, unless an earlier
 * run did (even one that chose other channels: the user's reachable channels may have changed
 * since). Without a cap to take this is one statement (shared with the other routings of its
 * event-loop iteration). With one it is a transaction: the cap
 * slot is taken only by the run whose rows went in, and a crash undoes both; over the cap, the
 * channels that would be sent are suppressed with reason rate_cap (`capped`).
 *
 * One user's notifications are routed in the order they were accepted: with `order: "hold"`
 * nothing is written while the user's previous notification of the same client and lane (the
 * latest one created before this one, within ORDER_LOOKBACK; all of them when several share
 * that time: accepted together, they have no order among them) has no channel rows yet, and
 * `held` says so; with "report" it is only named in `earlier`; without `order` it is not looked
 * for (what the lane consumer does while nothing puts its delivery order in doubt). The
 * transport delivers in order, except when a delivery is lost in transit (a NATS node or
 * connection lost) or a partition changes hands while its last holder still works: the earlier
 * one then comes back later, and the later one must wait for it. By induction checking the one
 * before is enough: it was itself routed only after its own.
 */
export async function recordRoutedChannels(database: Database, routing: Routing): Promise<RoutingRecord> {
  if (routing.cap === null) return routeBatched(database, routing);
  const { sql } = database;
  const id = routing.notificationId;
  const channels = routing.channels.map((p) => p.channel);
  const statuses = routing.channels.map((p) => p.status);
  const reasons = routing.channels.map((p) => p.reason) as string[];
  const planned = routing.channels.map((p) => p.nextAttemptAt?.toISOString() ?? null) as string[];
  const hold = routing.order === "hold";
  const cap = routing.cap;
  return sql.begin(async (tx) => {
    let waiting: string | null = null;
    if (routing.order) {
      const [before] = await tx<{ routed: boolean; earlier: string | null }[]>`
        select exists (select 1 from notification_channels where notification_id = ${id}) as routed,
               (select earlier from (${previousUnrouted(
                 tx,
                 tx`select ${id}::text as id, ${routing.userId}::text as user_id, ${routing.clientId}::text as client_id,
                      ${routing.priority}::text as priority`,
               )}) w) as earlier`;
      waiting = before?.earlier ?? null;
      if (hold && !before?.routed && waiting !== null)
        return { first: false, capped: false, held: true, earlier: waiting };
    }
    const inserted = await tx`
      insert into notification_channels (notification_id, channel, status, reason, next_attempt_at, routed_status, routed_reason)
      select ${id}, c, s, r, n, s, r
      from unnest(${channels}::text[], ${statuses}::text[], ${reasons}::text[], ${planned}::timestamptz[]) as d(c, s, r, n)
      where not exists (select 1 from notification_channels where notification_id = ${id})
      on conflict (notification_id, channel) do nothing
      returning channel`;
    if (inserted.length === 0) return { first: false, capped: false, held: false, earlier: waiting };
    if (await takeCapSlot(tx, cap)) return { first: true, capped: false, held: false, earlier: waiting };
    await tx`
      update notification_channels
      set status = 'suppressed', reason = 'rate_cap', routed_status = 'suppressed', routed_reason = 'rate_cap', updated_at = now()
      where notification_id = ${id} and status = 'pending'`;
    return { first: true, capped: true, held: false, earlier: waiting };
  });
}

/** Channels of a notification still recorded as pending: what a redelivered routing publishes. */
export async function listPendingChannels(database: Database, notificationId: string): Promise<Channel[]> {
  const rows = await database.sql<RowPick<typeof notificationChannels, "channel">[]>`
    select channel from notification_channels where notification_id = ${notificationId} and status = 'pending'`;
  return rows.map((r) => r.channel as Channel);
}

/** Settles a channel that is still pending without sending it (suppressed or failed on a rerun). */
export async function settlePendingChannel(
  database: Database,
  ref: ChannelRef,
  status: ChannelStatus,
  reason: string | null,
): Promise<void> {
  await database.sql`
    update notification_channels set status = ${status}, reason = ${reason}, updated_at = now()
    where notification_id = ${ref.notification_id} and channel = ${ref.channel} and status = 'pending'`;
}

/**
 * Takes one of the user's promotional sends of `day` if the cap allows: one conditional upsert,
 * so concurrent routings (several partitions' workers, several processors) can never go past
 * the cap, and the count survives restarts. It runs in the transaction that records the
 * channels, so a crash between the two neither loses nor double-counts a send.
 */
export async function takeCapSlot(sql: Sql | TransactionSql, slot: CapSlot): Promise<boolean> {
  if (slot.cap <= 0) return false;
  const rows = await sql`
    insert into promotional_daily_counts as c (user_id, day, count) values (${slot.userId}, ${slot.day}, 1)
    on conflict (user_id, day) do update set count = c.count + 1 where c.count < ${slot.cap}
    returning count`;
  return rows.length > 0;
}

/** Drops cap counters of days before `cutoff` (YYYY-MM-DD); answers how many went. */
export async function purgeCapCounts(database: Database, cutoff: string): Promise<number> {
  const result = await database.sql`delete from promotional_daily_counts where day < ${cutoff}::date`;
  return result.count;
}

// ---- Worker side: the channel a work item names, its attempts and its status moves.

export type DeliveryChannelRow = Omit<
  RowPick<typeof notificationChannels, "status" | "attempts" | "attempts_before_replay">,
  "status"
> & { status: ChannelStatus };

/**
 * A channel's delivery state, undefined when it has no row. The reads of one event-loop
 * iteration on one pool go in one statement.
 */
export const loadChannel: (sql: Sql, ref: ChannelRef) => Promise<DeliveryChannelRow | undefined> = perIterationOf(
  async (sql: Sql, refs: readonly ChannelRef[]) => {
    const keys = unnestColumns(sql, "k", {
      notification_id: ["text", refs.map((r) => r.notification_id)],
      channel: ["text", refs.map((r) => r.channel)],
    });
    const rows = await sql<Array<DeliveryChannelRow & ChannelRef>>`
      select c.notification_id, c.channel, c.status, c.attempts, c.attempts_before_replay
      from ${keys} join notification_channels c using (notification_id, channel)`;
    const found = new Map(
      rows.map(({ status, attempts, attempts_before_replay, ...ref }) => [
        refKey(ref),
        { status, attempts, attempts_before_replay },
      ]),
    );
    return refs.map((ref) => found.get(refKey(ref)));
  },
  GATHER,
);

/** One provider attempt and what came of it: the history a dead letter carries. */
export interface Attempt {
  attempt: number;
  outcome: string;
  /** The provider called; null when none was (nothing sent, or a reconciliation). */
  provider?: string | null;
  providerId: string | null;
  error: string | null;
}

export interface StatusFields {
  reason?: string | null;
  provider?: string;
  providerId?: string | null;
  attempts?: number;
  /** When a retrying or parked channel is looked at again. */
  nextAttemptAt?: Date | null;
  /** The attempt that led here, recorded in the same statement (whether or not the move happens). */
  attempt?: Attempt;
}

interface Move {
  ref: ChannelRef;
  to: ChannelStatus;
  fields: StatusFields;
}

/**
 * Moves the moves of one batch in one statement: each one's attempt line (when it has one),
 * its channel's new status where the channel's present status allows the move, and a history row
 * for each channel moved. Answers, per move, whether its channel moved.
 */
async function moveMany(sql: Sql, asked: readonly Move[]): Promise<boolean[]> {
  // In one order whoever sends them, so two batches over the same channels lock them alike.
  const moves = [...asked].sort(byKey((m) => refKey(m.ref)));
  const column = <T>(pick: (move: Move) => T) => moves.map(pick);
  const input = unnestColumns(sql, "i", {
    notification_id: ["text", column((m) => m.ref.notification_id)],
    channel: ["text", column((m) => m.ref.channel)],
    status: ["text", column((m) => m.to)],
    movable: ["text", column((m) => statusesMovableTo(m.to).join(","))],
    reason: ["text", column((m) => m.fields.reason ?? null)],
    provider: ["text", column((m) => m.fields.provider ?? null)],
    provider_id: ["text", column((m) => m.fields.providerId ?? null)],
    attempts: ["int", column((m) => m.fields.attempts ?? null)],
    next_attempt_at: ["timestamptz", column((m) => m.fields.nextAttemptAt?.toISOString() ?? null)],
    tried_attempt: ["int", column((m) => m.fields.attempt?.attempt ?? null)],
    tried_outcome: ["text", column((m) => m.fields.attempt?.outcome ?? null)],
    tried_provider: ["text", column((m) => m.fields.attempt?.provider ?? null)],
    tried_provider_id: ["text", column((m) => m.fields.attempt?.providerId ?? null)],
    tried_error: ["text", column((m) => m.fields.attempt?.error ?? null)],
  });
  const rows = await sql<ChannelRef[]>`
    with input as (
      select * from ${input}
    ), tried as (
      insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, error)
      select notification_id, channel, tried_attempt, tried_outcome, tried_provider, tried_provider_id, tried_error
      from input where tried_attempt is not null
      on conflict do nothing
    ), moved as (
      update notification_channels c set
        status = i.status,
        reason = i.reason,
        provider = coalesce(i.provider, c.provider),
        provider_id = coalesce(i.provider_id, c.provider_id),
        attempts = coalesce(i.attempts, c.attempts),
        next_attempt_at = i.next_attempt_at,
        updated_at = now()
      from input i
      where c.notification_id = i.notification_id and c.channel = i.channel
        and c.status = any(string_to_array(i.movable, ','))
      returning c.notification_id, c.channel, c.status, c.reason, c.attempts, c.provider_id, c.updated_at
    ), history as (
      insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at)
      select notification_id, channel, status, reason, attempts, provider_id, updated_at from moved
    )
    select notification_id, channel from moved`;
  const moved = new Set(rows.map(refKey));
  return asked.map((m) => moved.has(refKey(m.ref)));
}

const moveBatched = perIterationOf(moveMany, { writes: (m) => refKey(m.ref), ...GATHER });

/**
 * Moves a channel forward only (libs/core status.ts) and logs the transition with its time and
 * reason in `channel_status_events`, in one statement: a refused move logs nothing. Answers
 * whether the move happened. The moves of one event-loop iteration on one pool go in one
 * statement (two moves of one channel still one after the other).
 */
export const moveStatus = (sql: Sql, ref: ChannelRef, to: ChannelStatus, fields: StatusFields): Promise<boolean> =>
  moveBatched(sql, { ref, to, fields });

export async function recordAttempt(sql: Sql, ref: ChannelRef, a: Attempt): Promise<void> {
  await sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, error)
    values (${ref.notification_id}, ${ref.channel}, ${a.attempt}, ${a.outcome}, ${a.provider ?? null}, ${a.providerId}, ${a.error})
    on conflict do nothing`;
}

/**
 * What a dead letter carries besides the item: the original request from the notification log
 * (null when it is gone) and every attempt of the channel, oldest first.
 */
export async function readDeliveryHistory(
  sql: Sql,
  ref: ChannelRef,
): Promise<{ notification: DeadLetterNotification | null; history: DeadLetterAttempt[] }> {
  const [notification] = await sql<DeadLetterNotification[]>`
    select id as notification_id, client_id, user_id, category, template_id, template_version, priority,
      requested_channels, data, dedup_key, created_at
    from notifications where id = ${ref.notification_id}`;
  const history = await sql<DeadLetterAttempt[]>`
    select attempt, outcome, provider, provider_id, error, at from delivery_attempts
    where notification_id = ${ref.notification_id} and channel = ${ref.channel} order by attempt`;
  return { notification: notification ?? null, history: [...history] };
}
