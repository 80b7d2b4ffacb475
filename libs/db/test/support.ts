import { randomUUID } from "node:crypto";
import { newId } from "@notify/core";
import type { AcceptedRow } from "../src/accept/notifications.js";
import type { Database } from "../src/pool.js";

/** One accepted notification's row for `acceptNotifications`, with `over` on top of the defaults. */
export const acceptedRow = (clientId: string, key: string, over: Partial<AcceptedRow> = {}): AcceptedRow => ({
  id: newId(),
  client_id: clientId,
  key,
  request_hash: `hash-${key}`,
  user_id: "u1",
  category: "security",
  template_id: "welcome",
  template_version: 1,
  priority: "transactional",
  channels: null,
  data: { name: "Ada" },
  partition: 0,
  deliver_by: null,
  fallback: null,
  ...over,
});

/** Inserts a bare promotional notification for `userId` and answers its id. */
export async function insertNotification(sql: Database["sql"], userId = "u1"): Promise<string> {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    values (${id}, 'c', ${userId}, 'promo', 'welcome', 'promotional', ${sql.json({})}, ${id}, 'h', 0, ${new Date()})`;
  return id;
}

/** A channel row's status and reason. */
export const channelRowOf = async (sql: Database["sql"], id: string, channel = "email") =>
  (
    await sql<{ status: string; reason: string | null }[]>`
    select status, reason from notification_channels where notification_id = ${id} and channel = ${channel}`
  )[0];

/**
 * Whether some statement on the database of `sql` waits for a lock, looked for up to 5 s: that
 * a statement a test started is blocked by the rows another transaction holds.
 */
export async function someoneWaitsForALock(sql: Database["sql"]): Promise<boolean> {
  for (let i = 0; i < 500; i++) {
    const [w] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`;
    if ((w?.n ?? 0) > 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}
