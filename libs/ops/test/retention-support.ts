import type { Database } from "@notify/db";
import { idAt } from "@notify/testing";

const DAY_MS = 86_400_000;

export { idAt };

/**
 * A delivered notification created `daysAgo` days ago, with a channel, its history, an attempt
 * and a fallback chain that ended. Its id is made at its created_at, as ingest makes it (unless
 * `id` says otherwise).
 */
export async function seed(
  database: Database,
  userId: string,
  daysAgo: number,
  options: { id?: string } = {},
): Promise<string> {
  const createdAt = Date.now() - daysAgo * DAY_MS;
  const id = options.id ?? idAt(createdAt);
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    values (${id}, 'shop', ${userId}, 'news', 'welcome', 'promotional', '{"name":"Ada"}', ${id}, 'h', 1,
      ${new Date(createdAt)}::timestamptz + interval '123 microseconds')`;
  await database.sql`insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts, user_id)
    values (${id}, 'email', 'delivered', 'sendgrid', ${`pm-${id}`}, 1, ${userId})`;
  await database.sql`insert into channel_status_events (notification_id, channel, status, attempt, user_id)
    values (${id}, 'email', 'delivered', 1, ${userId})`;
  await database.sql`insert into delivery_attempts (notification_id, channel, attempt, outcome, user_id)
    values (${id}, 'email', 1, 'accepted', ${userId})`;
  await database.sql`insert into notification_fallbacks (notification_id, steps, next_step, watching, taken, done_at, user_id)
    values (${id}, '[{"channel":"sms","when":["failed"]}]', 1, 'email', '[]', ${new Date(createdAt)}, ${userId})`;
  return id;
}

/** A notification whose id was made `idDaysAgo` days ago, far from its created_at. */
export const seedWithIdFrom = (database: Database, userId: string, daysAgo: number, idDaysAgo: number) =>
  seed(database, userId, daysAgo, { id: idAt(Date.now() - idDaysAgo * DAY_MS) });

/** Notifications as rows of JSON: the row and everything that hangs off it, to compare before and after. */
export const snapshot = async (database: Database, ids: string[]) =>
  database.sql`select to_json(n)::text as n,
      (select json_agg(c)::text from notification_channels c where c.notification_id = n.id) as c,
      (select json_agg(e)::text from channel_status_events e where e.notification_id = n.id) as e,
      (select json_agg(a)::text from delivery_attempts a where a.notification_id = n.id) as a,
      (select json_agg(f)::text from notification_fallbacks f where f.notification_id = n.id) as f
    from notifications n where id = any(${ids}::text[]) order by id`;

/** The ids of the live notifications among `ids`. */
export const live = async (database: Database, ids: string[]) =>
  (await database.sql<{ id: string }[]>`select id from notifications where id = any(${ids}::text[]) order by id`).map(
    (r) => r.id,
  );
