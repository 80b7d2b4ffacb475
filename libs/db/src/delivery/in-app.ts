import type { Sql } from "../pool.js";
import { INBOX_NOTIFY_CHANNEL } from "../schema/index.js";

/**
 * The advisory lock class of a user's inbox stores (the second key is the hash of the user id;
 * a collision only makes two users' stores wait for each other). Other classes: 7266001
 * migrations, 7266002 broadcast counts, 7266003 role setup, 7266004 throttles, 7266006 daily caps.
 */
const INBOX_STORE_LOCK = 7266005;

/**
 * Stores an in-app message (idempotent per notification) and wakes the user's open streams in
 * the same statement, so a stream never misses a committed item. Returns the item's id.
 *
 * One store of a user's items at a time, from before its id is taken to its commit: a user's
 * item ids then commit in the order they are taken, and a stream that reads the ids after the
 * last it sent never passes over one committed later than a higher id. Ids come from one
 * sequence for every user, so two users' stores do not wait for each other.
 */
export async function storeInboxItem(
  sql: Sql,
  item: { userId: string; notificationId: string; category: string; title: string | null; body: string },
): Promise<number> {
  const [row] = await sql<{ id: string }[]>`
    with serialized as (
      select pg_advisory_xact_lock(${INBOX_STORE_LOCK}, hashtext(${item.userId}::text))
    ), stored as (
      -- The row is made (and its id taken from the sequence) only once the lock is held.
      insert into inbox_items (user_id, client_id, notification_id, category, title, body)
      select ${item.userId}, (select client_id from notifications where id = ${item.notificationId}),
        ${item.notificationId}, ${item.category}, ${item.title}, ${item.body}
      from serialized
      on conflict (notification_id) do update set notification_id = excluded.notification_id
      returning id, user_id
    )
    select id, pg_notify(${INBOX_NOTIFY_CHANNEL}, user_id) from stored`;
  if (row === undefined) throw new Error("inbox item not stored");
  return Number(row.id);
}
