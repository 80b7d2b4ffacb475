import { type Channel, type ChannelStatus, decodeCursor, encodeCursor, type Priority } from "@notify/core";
import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import { type NotificationStatusView, withStatus } from "./get.js";
import type { ListNotificationsQuery } from "./list-schemas.js";

export interface NotificationPage {
  data: NotificationStatusView[];
  next_cursor: string | null;
  has_more: boolean;
}

const WAITING: readonly ChannelStatus[] = ["deferred", "retrying", "parked"];

/**
 * What a cursor is bound to: the list, the client (a cursor grants nothing to another client)
 * and every filter (a cursor reused with other filters would silently skip or repeat rows).
 * The limit is left out: a client may change its page size between pages.
 */
const cursorContext = (clientId: string, userId: string, q: ListNotificationsQuery) =>
  JSON.stringify([
    "users.notifications",
    clientId,
    userId,
    q.category ?? null,
    q.status ?? null,
    q.since?.toISOString() ?? null,
    q.until?.toISOString() ?? null,
  ]);

/**
 * GET /api/v1/users/{id}/notifications: newest first by (created_at desc, id), the order of
 * notifications_user_created_idx, keyset-paged. Only the calling client's notifications.
 */
export async function listUserNotifications(
  database: Database,
  cursorSecret: string,
  clientId: string,
  userId: string,
  query: ListNotificationsQuery,
): Promise<NotificationPage> {
  const context = cursorContext(clientId, userId, query);
  const after = query.cursor === undefined ? null : decodeCursor(cursorSecret, context, query.cursor);
  const { sql } = database;
  try {
    // Microseconds, exactly: a Date keeps milliseconds, and rows stored in one group commit
    // share their created_at, so the cursor must compare at Postgres' own precision.
    const rows = await sql<
      Array<{
        id: string;
        user_id: string;
        category: string;
        template_id: string;
        priority: Priority;
        created_at: Date;
        micros: string;
      }>
    >`
      select n.id, n.user_id, n.category, n.template_id, n.priority, n.created_at,
             (extract(epoch from n.created_at) * 1000000)::bigint::text as micros
      from notifications n
      where n.user_id = ${userId} and n.client_id = ${clientId}
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
      ? await sql<
          Array<{
            notification_id: string;
            channel: Channel;
            status: ChannelStatus;
            provider_id: string | null;
            reason: string | null;
            updated_at: Date;
            next_attempt_at: Date | null;
          }>
        >`
          select notification_id, channel, status, provider_id, reason, updated_at, next_attempt_at
          from notification_channels where notification_id = any(${page.map((row) => row.id)}::text[])`
      : [];
    const views = new Map<string, NotificationStatusView>();
    for (const row of page) {
      views.set(row.id, {
        notification_id: row.id,
        user_id: row.user_id,
        category: row.category,
        template_id: row.template_id,
        priority: row.priority,
        status: "accepted",
        created_at: row.created_at.toISOString(),
        channels: {},
      });
    }
    for (const row of channels) {
      const view = views.get(row.notification_id);
      if (!view) continue;
      view.channels[row.channel] = {
        status: row.status,
        provider_id: row.provider_id,
        reason: row.reason,
        ts: row.updated_at.toISOString(),
        next_attempt_at: row.next_attempt_at && WAITING.includes(row.status) ? row.next_attempt_at.toISOString() : null,
      };
    }
    const last = page.at(-1);
    const hasMore = rows.length > query.limit;
    return {
      data: [...views.values()].map(withStatus),
      next_cursor:
        hasMore && last ? encodeCursor(cursorSecret, context, { micros: BigInt(last.micros), id: last.id }) : null,
      has_more: hasMore,
    };
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
