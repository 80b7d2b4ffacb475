import type { Sql } from "../pool.js";
import { INBOX_NOTIFY_CHANNEL } from "../schema/index.js";

/**
 * Stores an in-app message (idempotent per notification) and wakes the user's open streams in
 * the same statement, so a stream never misses a committed item. Returns the item's id.
 */
export async function storeInboxItem(
  sql: Sql,
  item: { userId: string; notificationId: string; category: string; title: string | null; body: string },
): Promise<number> {
  const [row] = await sql<{ id: string }[]>`
    with stored as (
      insert into inbox_items (user_id, client_id, notification_id, category, title, body)
      values (${item.userId}, (select client_id from notifications where id = ${item.notificationId}),
        ${item.notificationId}, ${item.category}, ${item.title}, ${item.body})
      on conflict (notification_id) do update set notification_id = excluded.notification_id
      returning id, user_id
    )
    select id, pg_notify(${INBOX_NOTIFY_CHANNEL}, user_id) from stored`;
  if (row === undefined) throw new Error("inbox item not stored");
  return Number(row.id);
}
