import { decodeCursor, encodeCursor } from "@notify/core";
import { type Database, listUserNotificationRecords } from "@notify/db";
import { toAppError } from "@notify/http";
import { type NotificationStatusView, withStatus } from "./get.js";
import type { ListNotificationsQuery } from "./list-schemas.js";

export interface NotificationPage {
  data: NotificationStatusView[];
  next_cursor: string | null;
  has_more: boolean;
}

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
 * GET /api/v1/users/{id}/notifications: newest first by (created_at desc, id), keyset-paged.
 * Only the calling client's notifications.
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
  try {
    const { records, last, hasMore } = await listUserNotificationRecords(database, {
      clientId,
      userId,
      ...(query.category === undefined ? {} : { category: query.category }),
      ...(query.status === undefined ? {} : { status: query.status }),
      ...(query.since === undefined ? {} : { since: query.since }),
      ...(query.until === undefined ? {} : { until: query.until }),
      after,
      limit: query.limit,
    });
    return {
      data: records.map(withStatus),
      next_cursor: hasMore && last ? encodeCursor(cursorSecret, context, last) : null,
      has_more: hasMore,
    };
  } catch (error) {
    throw toAppError(error);
  }
}
