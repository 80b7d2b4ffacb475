import type { Channel, ChannelStatus } from "@notify/core";
import type { PendingQuery, Row, TransactionSql } from "postgres";
import { byKey, GATHER, perIterationOf, unnestColumns } from "../batch.js";
import type { ChannelRef } from "../channel-ref.js";
import { idBounds, ordersIdsAsJavaScript, timeOrdered, withinIds } from "../log-keys.js";
import type { Database, Sql } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { notificationChannels } from "../schema/index.js";
import { type CapSlot, takeCapSlot } from "./daily-cap.js";
import { returnThrottleSlot, type ThrottleLimit, type ThrottleTaken, takeThrottleSlot } from "./throttle.js";

/** One channel's outcome as routing decided it. */
export interface RoutedChannel {
  channel: Channel;
  status: ChannelStatus;
  reason: string | null;
  nextAttemptAt: Date | null;
  /**
   * What the decision's history row says beside its reason (`reason: detail`), e.g. the entry of
   * the suppression list that suppressed the channel; the channel's own reason stays `reason`.
   */
  detail?: string | null;
}

/** The reason a routing decision's history row records: the reason, and its detail when it has one. */
export const routedReason = (p: Pick<RoutedChannel, "reason" | "detail">): string | null =>
  p.reason !== null && p.detail ? `${p.reason}: ${p.detail}` : p.reason;

/**
 * How far back the user's previous notification is looked for: one older than this and still
 * unrouted is not on its way back (the reconciler routes what the lane lost), and the walk back
 * through the user's notifications of other lanes and clients stays bounded.
 */
const ORDER_LOOKBACK = "1 hour";

/**
 * How far a notification's id (a UUIDv7 of the service that accepted it) may be from its
 * created_at (PostgreSQL's time of the insert, by another clock, a moment later): far beyond any
 * such gap, and the window it widens still lies in one daily partition of the log, or two.
 */
const ID_CLOCK_SLACK = "1 hour";

/** What recording a routing did. */
export interface RoutingRecord {
  /** This run wrote the channel rows (false: an earlier run did, or `held`). */
  first: boolean;
  /** Over the daily cap: the channels that would be sent were suppressed with reason rate_cap. */
  capped: boolean;
  /**
   * Over its throttle: the channels that would be sent were suppressed with reason throttled,
   * by this run or (with `first` false) by the run that recorded the routing.
   */
  throttled: boolean;
  /** Nothing was written: the user's previous notification in the lane is not routed yet. */
  held: boolean;
  /** That previous notification, when it was looked for and is still unrouted (held or not). */
  earlier: string | null;
  /**
   * Nothing was written: the notification is not in the log (ingest removed it when its publish
   * failed). Its row is share-locked while the channels go in, as a foreign key would, so it
   * cannot go between the check and the commit.
   */
  gone?: boolean;
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
  /**
   * The notification's throttle, when it has one: a slot is taken when a channel is to be sent
   * now (one pending), before the cap.
   */
  throttle?: ThrottleLimit | null;
  order?: "hold" | "report";
}

/**
 * For each notification of `notifications` (rows of id, user_id, client_id, priority), the user's
 * previous one in its client and lane when that one has no channel rows yet, as (id, earlier):
 * the latest created before it, within ORDER_LOOKBACK (any of them when several share that time).
 * A notification whose previous one is routed, or that has none, has no row. A digest item that
 * joined its digest is routed: it never has channel rows of its own (its digest's notification
 * has them, created after it).
 *
 * `ids` are those of `notifications`. When every one is a UUIDv7 (timeOrdered, log-keys.ts) the
 * previous one is looked for among the ids made in that window (ORDER_LOOKBACK and
 * ID_CLOCK_SLACK before this one's, up to ID_CLOCK_SLACK after), so in the log's partitions of
 * those hours only, and, where withinIds would bound a lookup by the batch's ids, within the
 * whole batch's window too, which the executor prunes by as it starts; ids of another shape
 * (tests' own) say nothing of their time, and every partition is read for them.
 */
const previousUnrouted = (sql: Sql | TransactionSql, notifications: PendingQuery<Row[]>, ids: readonly string[]) => {
  const windowed = timeOrdered(ids);
  const bounds = windowed && ordersIdsAsJavaScript(sql) ? idBounds(ids) : null;
  const window = (id: string) => sql`
    ${
      windowed
        ? sql`
        and ${sql.unsafe(id)} >= notify_log_bound(notify_log_time(n.id) - ${ORDER_LOOKBACK}::interval - ${ID_CLOCK_SLACK}::interval)
        and ${sql.unsafe(id)} < notify_log_bound(notify_log_time(n.id) + ${ID_CLOCK_SLACK}::interval)`
        : sql``
    }
    ${
      bounds === null
        ? sql``
        : sql`
        and ${sql.unsafe(id)} >= notify_log_bound(notify_log_time(concat(${bounds.least}::text)) - ${ORDER_LOOKBACK}::interval - ${ID_CLOCK_SLACK}::interval)
        and ${sql.unsafe(id)} < notify_log_bound(notify_log_time(concat(${bounds.greatest}::text)) + ${ID_CLOCK_SLACK}::interval)`
    }`;
  return sql`
  select n.id, w.id as earlier
  from (${notifications}) n
  cross join lateral (
    select p.id from notifications p
    where p.user_id = n.user_id and p.client_id = n.client_id and p.priority = n.priority ${window("p.id")}
      and p.created_at = (
        select max(created_at) from notifications
        where user_id = n.user_id and client_id = n.client_id and priority = n.priority ${window("id")}
          and created_at < (select created_at from notifications where id = n.id and ${withinIds(sql, "id", ids)})
          and created_at >= (select created_at from notifications where id = n.id and ${withinIds(sql, "id", ids)})
            - ${ORDER_LOOKBACK}::interval)
      and not exists (select 1 from notification_channels c where c.notification_id = p.id ${window("c.notification_id")})
      and not exists (select 1 from digest_items i where i.notification_id = p.id)
    limit 1
  ) w`;
};

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
  // The batch's range of ids, in every lookup of the log (log-keys.ts).
  const ids = routings.map((r) => r.notificationId);
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
    routed_reason: ["text", plan(routedReason)],
    next_attempt_at: ["timestamptz", plan((p) => p.nextAttemptAt?.toISOString() ?? null)],
  });
  const rows = await sql<{ id: string; inserted: number; routed: boolean; present: boolean; earlier: string | null }[]>`
    with input as (
      select * from ${input}
    ), present as (
      select p.id from input n
      cross join lateral (
        select p.id from notifications p
        where p.id = n.id and p.user_id = n.user_id and ${withinIds(sql, "p.id", ids)}
        for key share
      ) p
    ), planned as (
      select * from ${channels}
    ), routed as (
      -- Looked up by key per notification (\`offset 0\`: a subquery the planner keeps as it is):
      -- as a semi-join, a plan without statistics hashes the batch and reads every channel row.
      select n.id from input n
      where exists (
        select 1 from notification_channels c where c.notification_id = n.id and ${withinIds(sql, "c.notification_id", ids)}
        offset 0)
    ), waiting as (
      ${previousUnrouted(sql, sql`select id, user_id, client_id, priority from input where order_mode is not null`, ids)}
    ), inserted as (
      insert into notification_channels (notification_id, channel, status, reason, next_attempt_at, routed_status, routed_reason,
        user_id)
      select d.id, d.channel, d.status, d.reason, d.next_attempt_at, d.status, d.routed_reason, n.user_id
      from planned d join input n on n.id = d.id
      where d.id not in (select id from routed)
        and d.id in (select id from present)
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
    select n.id, coalesce(i.inserted, 0) as inserted, n.id in (select id from routed) as routed,
           n.id in (select id from present) as present, w.earlier
    from input n
    left join (select notification_id, count(*)::int as inserted from inserted group by notification_id) i
      on i.notification_id = n.id
    left join waiting w on w.id = n.id`;
  const byId = new Map(rows.map((row) => [row.id, row]));
  return asked.map((routing) => {
    const row = byId.get(routing.notificationId);
    const first = (row?.inserted ?? 0) > 0;
    const earlier = row?.earlier ?? null;
    if (row?.present === false)
      return { first: false, capped: false, throttled: false, held: false, earlier: null, gone: true };
    const held = routing.order === "hold" && !first && !row?.routed && earlier !== null;
    return { first, capped: false, throttled: false, held, earlier };
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
 * since). Without a cap or a throttle this is one statement (shared with the other routings of
 * its event-loop iteration). With one it is a transaction: the throttle slot and the cap slot
 * are taken only by the run whose rows went in, and a crash undoes all of it; over the throttle
 * (takeThrottleSlot), the channels that would be sent are suppressed with reason throttled
 * (`throttled`), over the cap with reason rate_cap (`capped`).
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
  if (routing.cap === null && !routing.throttle) return routeBatched(database, routing);
  const { sql } = database;
  const id = routing.notificationId;
  const channels = routing.channels.map((p) => p.channel);
  const statuses = routing.channels.map((p) => p.status);
  const reasons = routing.channels.map((p) => p.reason) as string[];
  const routedReasons = routing.channels.map(routedReason) as string[];
  const planned = routing.channels.map((p) => p.nextAttemptAt?.toISOString() ?? null) as string[];
  const hold = routing.order === "hold";
  const cap = routing.cap;
  const throttle = routing.throttle ?? null;
  const sending = routing.channels.some((p) => p.status === "pending");
  return sql.begin(async (tx): Promise<RoutingRecord> => {
    const [present] = await tx`
      select 1 from notifications where id = ${id} and user_id = ${routing.userId} for key share`;
    if (!present) return { first: false, capped: false, throttled: false, held: false, earlier: null, gone: true };
    let waiting: string | null = null;
    if (routing.order) {
      const [before] = await tx<{ routed: boolean; earlier: string | null }[]>`
        select exists (select 1 from notification_channels where notification_id = ${id}) as routed,
               (select earlier from (${previousUnrouted(
                 tx,
                 tx`select ${id}::text as id, ${routing.userId}::text as user_id, ${routing.clientId}::text as client_id,
                      ${routing.priority}::text as priority`,
                 [id],
               )}) w) as earlier`;
      waiting = before?.earlier ?? null;
      if (hold && !before?.routed && waiting !== null)
        return { first: false, capped: false, throttled: false, held: true, earlier: waiting };
    }
    const inserted = await tx`
      insert into notification_channels (notification_id, channel, status, reason, next_attempt_at, routed_status, routed_reason,
        user_id)
      select ${id}, c, s, r, n, s, rr, ${routing.userId}::text
      from unnest(${channels}::text[], ${statuses}::text[], ${reasons}::text[], ${planned}::timestamptz[],
                  ${routedReasons}::text[]) as d(c, s, r, n, rr)
      where not exists (select 1 from notification_channels where notification_id = ${id})
      on conflict (notification_id, channel) do nothing
      returning channel`;
    if (inserted.length > 0 && routing.deferredUntil !== null)
      await tx`
        insert into deferred_notifications (notification_id, user_id, due_at)
        values (${id}, ${routing.userId}, ${routing.deferredUntil})
        on conflict (notification_id) do nothing`;
    if (inserted.length === 0) {
      // Routed before: whether that run found it over its throttle (what a hand-off to its digest reads).
      const throttled =
        throttle !== null &&
        (
          await tx`
            select 1 from notification_channels where notification_id = ${id} and routed_reason = 'throttled' limit 1`
        ).length > 0;
      return { first: false, capped: false, throttled, held: false, earlier: waiting };
    }
    const suppress = (reason: "rate_cap" | "throttled") => tx`
      update notification_channels
      set status = 'suppressed', reason = ${reason}, routed_status = 'suppressed', routed_reason = ${reason}, updated_at = now()
      where notification_id = ${id} and status = 'pending'`;
    // The throttle before the cap: a notification over its throttle is not sent, so it does not
    // spend one of the user's promotional sends of the day; one the cap stops gives its throttle
    // slot back (the lock on the key is held until commit, so no other routing counted it).
    const take = throttle && { ...throttle, clientId: routing.clientId, userId: routing.userId, notificationId: id };
    let slot: ThrottleTaken | null = null;
    if (take && sending) {
      slot = await takeThrottleSlot(tx, take);
      if (!slot.granted) {
        await suppress("throttled");
        return { first: true, capped: false, throttled: true, held: false, earlier: waiting };
      }
    }
    if (cap === null || (await takeCapSlot(tx, cap)))
      return { first: true, capped: false, throttled: false, held: false, earlier: waiting };
    if (take && slot?.fresh) await returnThrottleSlot(tx, take);
    await suppress("rate_cap");
    return { first: true, capped: true, throttled: false, held: false, earlier: waiting };
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
