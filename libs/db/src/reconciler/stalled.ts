import { type Channel, type ChannelStatus, canTransition } from "@notify/core";
import { asLaneNotification, type LaneNotification, type LaneRow } from "../accept/lane-message.js";
import { lockChannels } from "../lock-order.js";
import type { Database } from "../pool.js";
import { type RoutedChannel, routedReason } from "../routing/channels.js";
import type { RowPick } from "../rows.js";
import type { notificationChannels } from "../schema/index.js";

// What the reconciler looks for: work that stalled because a message was lost (a notification
// accepted but never routed, a channel no worker picked up) or a worker died (an in-app item
// stored, its channel left unsettled).

/**
 * One chunk of the notification log from `from` on (ids are time-ordered UUIDv7 text) and
 * before `before`, at most `limit` ids: those that have no channel outcome yet (accepted, not
 * routed) and are not waiting in the publish outbox (ingest's own sweep publishes those), and
 * the last id of the chunk, where the next chunk starts.
 */
export async function findUnroutedNotifications(
  database: Database,
  range: { from: string; before: string; limit: number },
): Promise<{ unrouted: LaneNotification[]; last: string | null }> {
  const { sql } = database;
  const [edge] = await sql<{ last: string | null }[]>`
    select max(id) as last from (
      select id from notifications where id >= ${range.from} and id < ${range.before} order by id limit ${range.limit}
    ) chunk`;
  const last = edge?.last ?? null;
  if (last === null) return { unrouted: [], last };
  const rows = await sql<LaneRow[]>`
    select id, client_id, user_id, category, template_id, template_version, priority, requested_channels, data, partition, created_at,
      deliver_by, send_at, digest, throttle, digest_of, trace_parent
    from notifications n
    where id >= ${range.from} and id <= ${last}
      and not exists (select 1 from notification_channels c where c.notification_id = n.id)
      and not exists (select 1 from publish_outbox o where n.id = any(o.notification_ids))
      -- A digest's item has no outcome of its own: its digest's notification has.
      and not exists (select 1 from digest_items i where i.notification_id = n.id)
    order by id`;
  return { unrouted: rows.map(asLaneNotification), last };
}

/** A channel that has waited for a worker longer than the bound, with its notification. */
export interface WaitingChannel extends LaneNotification {
  channel: Channel;
  status: ChannelStatus;
  /** Its last change. */
  updatedAt: Date;
  /** When it was planned to go (deferred) or be tried again (retrying, parked). */
  nextAttemptAt: Date | null;
}

type WaitingRow = LaneRow &
  Omit<
    RowPick<typeof notificationChannels, "channel" | "status" | "updated_at" | "next_attempt_at">,
    "channel" | "status"
  > & {
    channel: Channel;
    status: ChannelStatus;
  };

/**
 * Channels pending, retrying or parked, or deferred with their timer released, whose last change
 * and planned next attempt are both older than `before`: each should have been picked up by a
 * worker by now, unless its work item is gone. Oldest first.
 */
export async function findWaitingChannels(
  database: Database,
  options: { before: Date; limit: number },
): Promise<WaitingChannel[]> {
  const rows = await database.sql<WaitingRow[]>`
    select n.id, n.client_id, n.user_id, n.category, n.template_id, n.template_version, n.priority,
      n.requested_channels, n.data, n.partition, n.created_at, n.deliver_by, n.send_at, n.digest, n.throttle, n.digest_of, n.trace_parent, c.channel, c.status, c.updated_at, c.next_attempt_at
    from notification_channels c join notifications n on n.id = c.notification_id
    where (c.status in ('pending', 'retrying', 'parked') or c.status = 'deferred') and c.updated_at < ${options.before}
      and (c.next_attempt_at is null or c.next_attempt_at < ${options.before})
      and (c.status <> 'deferred'
        or not exists (select 1 from deferred_notifications d where d.notification_id = c.notification_id))
    order by c.updated_at limit ${options.limit}`;
  return rows.map((row) => ({
    ...asLaneNotification(row),
    channel: row.channel,
    status: row.status,
    updatedAt: row.updated_at,
    nextAttemptAt: row.next_attempt_at,
  }));
}

/**
 * Marks a stalled channel as looked at now, if it is still as it was found (same status, same
 * last change): answers its new last change, or null when something else moved it meanwhile.
 */
export async function touchWaitingChannel(
  database: Database,
  found: { message: { notification_id: string }; channel: Channel; status: ChannelStatus; updatedAt: Date },
): Promise<Date | null> {
  const [row] = await database.sql<{ updated_at: Date }[]>`
    update notification_channels set updated_at = clock_timestamp()
    where notification_id = ${found.message.notification_id} and channel = ${found.channel}
      and status = ${found.status} and date_trunc('milliseconds', updated_at) = ${found.updatedAt}
    returning updated_at`;
  return row?.updated_at ?? null;
}

/** A stalled channel as it was found: the row is changed only while it is still so. */
type FoundChannel = Parameters<typeof touchWaitingChannel>[1];

/**
 * Gives a stalled channel the outcome routing decides for it now instead of sending it (its
 * address put on the suppression list, or gone, since it was routed), if it is still as it was
 * found (same status, same last change), with its history row (`reason: detail`), in one
 * statement. Answers whether it moved.
 */
export async function settleWaitingChannel(
  database: Database,
  found: FoundChannel,
  outcome: Pick<RoutedChannel, "status" | "reason" | "detail">,
): Promise<boolean> {
  if (!canTransition(found.status, outcome.status)) return false;
  const rows = await database.sql`
    with moved as (
      update notification_channels set status = ${outcome.status}, reason = ${outcome.reason}, next_attempt_at = null,
        updated_at = now()
      where notification_id = ${found.message.notification_id} and channel = ${found.channel}
        and status = ${found.status} and date_trunc('milliseconds', updated_at) = ${found.updatedAt}
      returning notification_id, channel, status, attempts, provider_id, updated_at, user_id
    )
    insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at, user_id)
    select notification_id, channel, status, ${routedReason(outcome)}, attempts, provider_id, updated_at, user_id from moved`;
  return rows.count > 0;
}

/**
 * In-app channels left unsettled (a worker died during the store) whose item is in the inbox:
 * delivered, as the inbox itself says. One statement, with the status event. Answers how many.
 */
export async function settleInAppFromInbox(database: Database, before: Date, limit: number): Promise<number> {
  const rows = await database.sql`
    with found as (
      select c.notification_id, i.id as item_id
      from notification_channels c join inbox_items i on i.notification_id = c.notification_id
      where c.channel = 'in_app' and c.status = 'unsettled' and c.updated_at < ${before}
      order by c.updated_at limit ${limit}
    ), moved as (
      update notification_channels c set
        status = 'delivered', reason = 'settled from the inbox', provider = 'inapp',
        provider_id = 'inbox:' || locked.item_id, updated_at = now()
      from (${lockChannels(
        database.sql,
        database.sql`
        select c.notification_id, found.item_id
        from found join notification_channels c on c.notification_id = found.notification_id and c.channel = 'in_app'
        where c.status = 'unsettled'`,
      )}) locked
      where c.notification_id = locked.notification_id and c.channel = 'in_app' and c.status = 'unsettled'
      returning c.notification_id, c.channel, c.status, c.reason, c.attempts, c.provider_id, c.updated_at, c.user_id
    )
    insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at, user_id)
    select notification_id, channel, status, reason, attempts, provider_id, updated_at, user_id from moved`;
  return rows.count;
}
