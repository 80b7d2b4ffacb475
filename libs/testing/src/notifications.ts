import { randomBytes } from "node:crypto";
import type { Database } from "@notify/db";
import { eventually } from "./eventually.js";

/**
 * A UUIDv7 made at `ms`, as ingest's newId() would have made it then: a notification created in
 * the past needs one, as the log is partitioned by the time in its id.
 */
export function idAt(ms: number): string {
  const time = Math.floor(ms).toString(16).padStart(12, "0");
  const random = randomBytes(10).toString("hex");
  const variant = ((Number.parseInt(random.slice(3, 4), 16) & 0x3) | 0x8).toString(16);
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${random.slice(0, 3)}-${variant}${random.slice(4, 7)}-${random.slice(7, 19)}`;
}

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
