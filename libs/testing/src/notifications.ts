import type { Database } from "@notify/db";
import { eventually } from "./eventually.js";

/**
 * A notification row of `clientId` for `userId` (nothing published), for tests that store what a
 * worker would for it: the in-app inbox takes its client from this row.
 */
export async function seedNotification(
  database: Database,
  row: { id: string; clientId: string; userId: string; category?: string; createdAt?: Date },
): Promise<void> {
  await database.sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    values (${row.id}, ${row.clientId}, ${row.userId}, ${row.category ?? "account"}, 'welcome', 'transactional', '{}', ${row.id}, 'seeded', 0,
            coalesce(${row.createdAt ?? null}::timestamptz, now()))
    on conflict do nothing`;
}

/** True while the notification is listed in publish_outbox (its lane publish not settled). */
export async function inOutbox(database: Database, notificationId: string): Promise<boolean> {
  const [row] = await database.sql<{ listed: boolean }[]>`
    select exists (select 1 from publish_outbox where ${notificationId} = any(notification_ids)) as listed`;
  return row?.listed === true;
}

/** Waits until the notification's lane publish is settled (it left publish_outbox). */
export async function settled(database: Database, notificationId: string, timeoutMs = 5000): Promise<void> {
  await eventually(
    async () => ((await inOutbox(database, notificationId)) ? undefined : true),
    timeoutMs,
    "the publish to be settled (outbox row deleted)",
  );
}
