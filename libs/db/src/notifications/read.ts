import type { Channel, ChannelResult, ChannelStatus, KeysetPosition, Priority } from "@notify/core";
import type { Database } from "../index.js";
import type { RowPick } from "../rows.js";
import type { notificationChannels, notifications } from "../schema/index.js";

/**
 * A channel's result plus, non-breaking, when a waiting channel is next due: the planned send
 * time of a deferred channel (quiet hours), null otherwise.
 */
export interface ChannelResultView extends ChannelResult {
  next_attempt_at: string | null;
}

/** A notification with its channels' results; its overall status is derived by the caller. */
export interface NotificationRecord {
  notification_id: string;
  user_id: string;
  category: string;
  template_id: string;
  priority: Priority;
  created_at: string;
  channels: Partial<Record<Channel, ChannelResultView>>;
}

type HeadRow = Omit<
  RowPick<typeof notifications, "id" | "user_id" | "category" | "template_id" | "priority" | "created_at">,
  "priority"
> & { priority: Priority };
type ChannelRow = Omit<
  RowPick<
    typeof notificationChannels,
    "notification_id" | "channel" | "status" | "provider_id" | "reason" | "updated_at" | "next_attempt_at"
  >,
  "channel" | "status"
> & { channel: Channel; status: ChannelStatus };

type ChannelResultRow = Omit<ChannelRow, "notification_id">;

const WAITING: readonly ChannelStatus[] = ["deferred", "retrying", "parked"];

const toRecord = (row: HeadRow): NotificationRecord => ({
  notification_id: row.id,
  user_id: row.user_id,
  category: row.category,
  template_id: row.template_id,
  priority: row.priority,
  created_at: row.created_at.toISOString(),
  channels: {},
});

const toResult = (row: ChannelResultRow): ChannelResultView => ({
  status: row.status,
  provider_id: row.provider_id,
  reason: row.reason,
  ts: row.updated_at.toISOString(),
  next_attempt_at: row.next_attempt_at && WAITING.includes(row.status) ? row.next_attempt_at.toISOString() : null,
});

/** One notification of this client with its channels; null when this client has none by that id. */
export async function readNotification(
  database: Database,
  clientId: string,
  id: string,
): Promise<NotificationRecord | null> {
  // A left join: a notification not routed yet has one row, with no channel.
  const rows = await database.sql<Array<HeadRow & { [K in keyof ChannelResultRow]: ChannelResultRow[K] | null }>>`
    select n.id, n.user_id, n.category, n.template_id, n.priority, n.created_at,
           c.channel, c.status, c.provider_id, c.reason, c.updated_at, c.next_attempt_at
    from notifications n left join notification_channels c on c.notification_id = n.id
    where n.id = ${id} and n.client_id = ${clientId}`;
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
    select n.id, n.user_id, n.category, n.template_id, n.priority, n.created_at,
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
          : sql`and (
              n.created_at < timestamptz 'epoch' + ${after.micros.toString()}::bigint * interval '1 microsecond'
              or (n.created_at = timestamptz 'epoch' + ${after.micros.toString()}::bigint * interval '1 microsecond'
                  and n.id > ${after.id}))`
      }
    order by n.created_at desc, n.id
    limit ${query.limit + 1}`;
  const page = rows.slice(0, query.limit);
  const channels = page.length
    ? await sql<ChannelRow[]>`
        select notification_id, channel, status, provider_id, reason, updated_at, next_attempt_at
        from notification_channels where notification_id = any(${page.map((row) => row.id)}::text[])`
    : [];
  const records = new Map(page.map((row) => [row.id, toRecord(row)]));
  for (const row of channels) {
    const record = records.get(row.notification_id);
    if (record) record.channels[row.channel] = toResult(row);
  }
  const last = page.at(-1);
  return {
    records: [...records.values()],
    last: last ? { micros: BigInt(last.micros), id: last.id } : null,
    hasMore: rows.length > query.limit,
  };
}
