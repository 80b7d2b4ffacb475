import type { Channel, ChannelResult, ChannelStatus, KeysetPosition, Priority, SendAtLocal } from "@notify/core";
import { eachId } from "../log-keys.js";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { notificationChannels, notifications } from "../schema/index.js";

// Notifications read back with their channels' results: one by id, a user's list and the
// operator's search (ingest's GET routes and the console). Their overall status is derived by
// the caller (libs/core notification-status.ts), never stored.

/**
 * A channel's result plus, non-breaking, when a waiting channel is next due: the planned send
 * time of a deferred channel (quiet hours), null otherwise.
 */
export interface ChannelResultView extends ChannelResult {
  next_attempt_at: string | null;
  /** The provider that took the send (email may fail over from one to the next); null until one did. */
  provider: string | null;
}

/** A digest as the status of one of its items, or of its own notification, shows it. */
export interface NotificationDigest {
  id: string;
  key: string;
  /** open (collecting), closed (full, about to be sent), sent. */
  status: "open" | "closed" | "sent";
  item_count: number;
  /** When it is (or was) sent: its window's end, or when it filled up. */
  closes_at: string;
  /** The digest's own notification, once sent. */
  notification_id: string | null;
  /** Whether this notification is one of its items or its own notification. */
  role: "item" | "digest";
  /** An item canceled before the digest was sent: left out of it. */
  canceled: boolean;
  /** The statuses of its own notification's channels (empty until sent and routed). */
  statuses: ChannelStatus[];
}

/** A notification with its channels' results; its overall status is derived by the caller. */
export interface NotificationRecord {
  notification_id: string;
  /** The client that sent it: a caller reading across clients (the operator's routes) shows it. */
  client_id: string;
  user_id: string;
  category: string;
  template_id: string;
  priority: Priority;
  created_at: string;
  /** Never sent after this instant; null: no deadline. */
  deliver_by: string | null;
  /** Routed no earlier than this instant (send_at, or send_at_local as resolved); null: at once. */
  send_at: string | null;
  /** The wall-clock send time the request gave; null: none. */
  send_at_local: SendAtLocal | null;
  /** The digest it joined (an item) or sends (the digest's own notification); null: neither. */
  digest: NotificationDigest | null;
  /** A step of its channel fallback chain may still add a channel (it is decided, or waits for a receipt). */
  fallback_pending: boolean;
  /** W3C traceparent of the ingest request's span, when tracing was on. */
  trace_parent: string | null;
  channels: Partial<Record<Channel, ChannelResultView>>;
}

type HeadRow = Omit<
  RowPick<
    typeof notifications,
    | "id"
    | "client_id"
    | "user_id"
    | "category"
    | "template_id"
    | "priority"
    | "created_at"
    | "deliver_by"
    | "send_at"
    | "send_at_local"
    | "trace_parent"
  >,
  "priority"
> & { priority: Priority; fallback_pending: boolean; digest: DigestRow | null };
type ChannelRow = Omit<
  RowPick<
    typeof notificationChannels,
    "notification_id" | "channel" | "status" | "provider" | "provider_id" | "reason" | "updated_at" | "next_attempt_at"
  >,
  "channel" | "status"
> & { channel: Channel; status: ChannelStatus };

type ChannelResultRow = Omit<ChannelRow, "notification_id">;

const WAITING: readonly ChannelStatus[] = ["deferred", "retrying", "parked"];

/**
 * Whether notification `n`'s fallback chain may still add a channel: it is open and its watched
 * channel has an outcome the chain is about to act on, or the step waits for a delivery receipt
 * (`unconfirmed`). A `failed` step watching an accepted send for a later bounce does not count:
 * like any bounce, that one moves a settled status afterwards.
 */
const fallbackPending = (sql: Database["sql"]) => sql`exists (
  select 1 from notification_fallbacks f
  join notification_channels w on w.notification_id = f.notification_id and w.channel = f.watching
  where f.notification_id = n.id and f.done_at is null
    and (w.status not in ('delivered', 'unsettled') or (f.steps -> f.next_step -> 'when') ? 'unconfirmed')
  -- Looked up per notification (\`offset 0\` keeps it a subquery): as the hashed set PostgreSQL
  -- may choose instead, it reads every open chain of the log (log-keys.ts).
  offset 0)`;

/**
 * The digest a notification belongs to, as an item (its row in digest_items) or as the digest's
 * own notification (digest_of), with the statuses of that notification's channels once sent.
 */
const digestOf = (sql: Database["sql"]) => sql`(
  select json_build_object('id', d.id, 'key', d.key, 'status', d.status, 'item_count', d.item_count,
    'closes_at', d.closes_at, 'notification_id', d.notification_id,
    'canceled', exists (select 1 from digest_items i where i.notification_id = n.id and i.canceled_at is not null),
    'statuses', (select coalesce(json_agg(c.status), '[]') from notification_channels c where c.notification_id = d.notification_id))
  from digests d
  where d.id = coalesce((select i.digest_id from digest_items i where i.notification_id = n.id), n.digest_of)
    and d.user_id = n.user_id)`;

interface DigestRow {
  id: string;
  key: string;
  status: string;
  item_count: number;
  closes_at: string;
  notification_id: string | null;
  canceled: boolean;
  statuses: ChannelStatus[];
}

const toDigest = (row: DigestRow | null, notificationId: string): NotificationDigest | null =>
  row && {
    id: row.id,
    key: row.key,
    status: row.status as NotificationDigest["status"],
    item_count: row.item_count,
    closes_at: new Date(row.closes_at).toISOString(),
    notification_id: row.notification_id,
    role: row.notification_id === notificationId ? "digest" : "item",
    canceled: row.canceled,
    statuses: row.statuses,
  };

const toRecord = (row: HeadRow): NotificationRecord => ({
  notification_id: row.id,
  client_id: row.client_id,
  user_id: row.user_id,
  category: row.category,
  template_id: row.template_id,
  priority: row.priority,
  created_at: row.created_at.toISOString(),
  deliver_by: row.deliver_by?.toISOString() ?? null,
  send_at: row.send_at?.toISOString() ?? null,
  send_at_local: row.send_at_local ?? null,
  fallback_pending: row.fallback_pending,
  digest: toDigest(row.digest, row.id),
  trace_parent: row.trace_parent,
  channels: {},
});

const toResult = (row: ChannelResultRow): ChannelResultView => ({
  status: row.status,
  provider: row.provider,
  provider_id: row.provider_id,
  reason: row.reason,
  ts: row.updated_at.toISOString(),
  next_attempt_at: row.next_attempt_at && WAITING.includes(row.status) ? row.next_attempt_at.toISOString() : null,
});

/**
 * One notification of this client with its channels; null when this client has none by that id.
 * A null `clientId` finds any client's (the operator's routes, scope admin).
 */
export async function readNotification(
  database: Database,
  clientId: string | null,
  id: string,
): Promise<NotificationRecord | null> {
  // A left join: a notification not routed yet has one row, with no channel.
  const rows = await database.sql<Array<HeadRow & { [K in keyof ChannelResultRow]: ChannelResultRow[K] | null }>>`
    select n.id, n.client_id, n.user_id, n.category, n.template_id, n.priority, n.created_at, n.deliver_by, n.send_at, n.send_at_local,
           n.trace_parent, ${fallbackPending(database.sql)} as fallback_pending, ${digestOf(database.sql)} as digest,
           c.channel, c.status, c.provider, c.provider_id, c.reason, c.updated_at, c.next_attempt_at
    from notifications n left join notification_channels c on c.notification_id = n.id
    where n.id = ${id} ${clientId === null ? database.sql`` : database.sql`and n.client_id = ${clientId}`}`;
  const first = rows[0];
  if (!first) return null;
  const record = toRecord(first);
  for (const row of rows) {
    if (row.channel === null || row.status === null || row.updated_at === null) continue;
    record.channels[row.channel] = toResult({
      ...row,
      channel: row.channel,
      status: row.status,
      updated_at: row.updated_at,
    });
  }
  return record;
}

/**
 * Notifications of any client by id, each with its channels, in two statements whatever their
 * number; ids not found are left out.
 */
export async function readNotifications(database: Database, ids: readonly string[]): Promise<NotificationRecord[]> {
  if (ids.length === 0) return [];
  const { sql } = database;
  const rows = await sql<HeadRow[]>`
    select n.id, n.client_id, n.user_id, n.category, n.template_id, n.priority, n.created_at, n.deliver_by, n.send_at, n.send_at_local,
           n.trace_parent, ${fallbackPending(sql)} as fallback_pending, ${digestOf(sql)} as digest
    from ${eachId(sql, ids)} k
    -- Each looked up by its id, in its own partition (log-keys.ts).
    cross join lateral (select * from notifications n where n.id = k.id offset 0) n`;
  return withChannels(sql, rows);
}

export interface UserNotificationsQuery {
  clientId: string;
  userId: string;
  category?: string;
  /** Notifications with at least one channel in this status. */
  status?: ChannelStatus;
  since?: Date;
  until?: Date;
  /** Continue after this notification (created_at in microseconds, then id: the previous page's last). */
  after: KeysetPosition | null;
  limit: number;
}

/**
 * A client's notifications to one user, newest first by (created_at desc, id), the order of
 * notifications_user_created_idx, keyset-paged; `last` is the keyset of the page's last row.
 * The order by says `nulls last` as the index does (created_at is never null, but the planner
 * matches the words, and without them sorted every notification of the user for each page), and
 * the keyset's `created_at <=` bounds the index scan where an OR alone would only filter it.
 */
export async function listUserNotificationRecords(
  database: Database,
  query: UserNotificationsQuery,
): Promise<{ records: NotificationRecord[]; last: KeysetPosition | null; hasMore: boolean }> {
  const { sql } = database;
  const { after } = query;
  // Microseconds, exactly: a Date keeps milliseconds, and rows stored in one group commit
  // share their created_at, so the keyset must compare at Postgres' own precision.
  const rows = await sql<Array<HeadRow & { micros: string }>>`
    select n.id, n.client_id, n.user_id, n.category, n.template_id, n.priority, n.created_at, n.deliver_by, n.send_at, n.send_at_local,
           n.trace_parent, ${fallbackPending(sql)} as fallback_pending, ${digestOf(sql)} as digest,
           (extract(epoch from n.created_at) * 1000000)::bigint::text as micros
    from notifications n
    where n.user_id = ${query.userId} and n.client_id = ${query.clientId}
      ${query.category === undefined ? sql`` : sql`and n.category = ${query.category}`}
      ${query.since === undefined ? sql`` : sql`and n.created_at >= ${query.since}`}
      ${query.until === undefined ? sql`` : sql`and n.created_at < ${query.until}`}
      ${
        query.status === undefined
          ? sql``
          : sql`and exists (select 1 from notification_channels c
              where c.notification_id = n.id and c.status = ${query.status})`
      }
      ${
        after === null
          ? sql``
          : sql`and n.created_at <= ${keysetInstant(sql, after)}
              and (n.created_at < ${keysetInstant(sql, after)} or n.id > ${after.id})`
      }
    order by n.created_at desc nulls last, n.id
    limit ${query.limit + 1}`;
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  return {
    records: await withChannels(sql, page),
    last: last ? { micros: BigInt(last.micros), id: last.id } : null,
    hasMore: rows.length > query.limit,
  };
}

/** A keyset position's created_at, to the microsecond. */
const keysetInstant = (sql: Database["sql"], after: KeysetPosition) =>
  sql`timestamptz 'epoch' + ${after.micros.toString()}::bigint * interval '1 microsecond'`;

/** Records for head rows, in their order, with their channels read in one query. */
async function withChannels(sql: Database["sql"], page: readonly HeadRow[]): Promise<NotificationRecord[]> {
  const channels = page.length
    ? await sql<ChannelRow[]>`
        select c.notification_id, c.channel, c.status, c.provider, c.provider_id, c.reason, c.updated_at, c.next_attempt_at
        from ${eachId(
          sql,
          page.map((row) => row.id),
        )} k
        -- Each notification's looked up by its id, in its own partition (log-keys.ts).
        cross join lateral (select * from notification_channels c where c.notification_id = k.id offset 0) c`
    : [];
  const records = new Map(page.map((row) => [row.id, toRecord(row)]));
  for (const row of channels) {
    const record = records.get(row.notification_id);
    if (record) record.channels[row.channel] = toResult(row);
  }
  return [...records.values()];
}

/** What an operator looks a notification up by; every one given must match. */
export interface NotificationSearch {
  notificationId?: string;
  userId?: string;
  clientId?: string;
  /** Needs `clientId`: an Idempotency-Key is unique per client only. */
  idempotencyKey?: string;
  limit: number;
}

/**
 * Notifications of any client matching every criterion given, newest first (created_at desc,
 * then id). An Idempotency-Key is found through the 24 h idempotency guard (today's slot of it,
 * where every record still in the window has a row, and its legacy table) and, with a user id as
 * well, through the notification's own dedup_key at any age: notifications have no index on
 * dedup_key (the ingest path keeps its inserts cheap), so without a user it is looked up in the
 * guard only. A broadcast's recipients carry
 * `broadcast:<broadcast id>:<user id>` there.
 */
export async function searchNotificationRecords(
  database: Database,
  query: NotificationSearch,
): Promise<NotificationRecord[]> {
  const { sql } = database;
  const { notificationId, userId, clientId, idempotencyKey } = query;
  if (notificationId === undefined && userId === undefined && idempotencyKey === undefined) return [];
  if (idempotencyKey !== undefined && clientId === undefined) return [];
  const byKey =
    idempotencyKey === undefined
      ? sql``
      : sql`and (n.id in (select k.notification_id from idempotency_keys k
                  where k.client_id = ${clientId as string} and k.key = ${idempotencyKey}
                    and k.slot = notify_idempotency_slot(now())
                  union all
                  select l.notification_id from idempotency_keys_legacy l
                  where l.client_id = ${clientId as string} and l.key = ${idempotencyKey})
                ${userId === undefined ? sql`` : sql`or n.dedup_key = ${idempotencyKey}`})`;
  const rows = await sql<HeadRow[]>`
    select n.id, n.client_id, n.user_id, n.category, n.template_id, n.priority, n.created_at, n.deliver_by, n.send_at, n.send_at_local,
           n.trace_parent, ${fallbackPending(sql)} as fallback_pending, ${digestOf(sql)} as digest
    from notifications n
    where true
      ${notificationId === undefined ? sql`` : sql`and n.id = ${notificationId}`}
      ${userId === undefined ? sql`` : sql`and n.user_id = ${userId}`}
      ${clientId === undefined ? sql`` : sql`and n.client_id = ${clientId}`}
      ${byKey}
    order by n.created_at desc nulls last, n.id
    limit ${query.limit}`;
  return withChannels(sql, rows);
}
