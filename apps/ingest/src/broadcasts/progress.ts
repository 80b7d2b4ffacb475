import { AppError } from "@notify/core";
import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import type { BroadcastView } from "./schemas.js";

/**
 * A broadcast's progress, counted from its recipients' channel results (each recipient once,
 * by the best thing that happened to it). One client never sees another's broadcast (404).
 */
export async function getBroadcast(database: Database, clientId: string, id: string): Promise<BroadcastView> {
  const { sql } = database;
  try {
    const [row] = await sql<
      Array<{
        id: string;
        audience_id: string;
        status: BroadcastView["status"];
        category: string;
        template_id: string;
        total: number;
        expanded: number;
        created_at: Date;
        finished_at: Date | null;
      }>
    >`select id, audience_id, status, category, template_id, total::float8 as total, expanded::float8 as expanded,
        created_at, finished_at
      from broadcasts where id = ${id} and client_id = ${clientId}`;
    if (!row) throw new AppError("not_found", `broadcast ${id} does not exist`);
    const [counts] = await sql<{ delivered: number; failed: number; suppressed: number }[]>`
      select count(*) filter (where delivered)::float8 as delivered,
             count(*) filter (where not delivered and failed)::float8 as failed,
             count(*) filter (where not delivered and not failed and suppressed)::float8 as suppressed
      from (
        select bool_or(c.status = 'delivered') as delivered,
               bool_or(c.status in ('failed', 'bounced')) as failed,
               bool_and(c.status = 'suppressed') as suppressed
        from broadcast_recipients r join notification_channels c on c.notification_id = r.notification_id
        where r.broadcast_id = ${id}
        group by r.notification_id) as recipients`;
    return {
      broadcast_id: row.id,
      audience_id: row.audience_id,
      status: row.status,
      category: row.category,
      template_id: row.template_id,
      total: Number(row.total),
      expanded: Number(row.expanded),
      suppressed: Number(counts?.suppressed ?? 0),
      delivered: Number(counts?.delivered ?? 0),
      failed: Number(counts?.failed ?? 0),
      created_at: row.created_at.toISOString(),
      finished_at: row.finished_at?.toISOString() ?? null,
    };
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}

/**
 * Stops expanding: recipients already expanded keep their notifications (they are queued and
 * go through preferences and delivery like any other); no one after the cursor gets one. The
 * expander holds the broadcast's row while it writes a batch, so the cancel lands between two
 * batches and the count it leaves is exact.
 */
export async function cancelBroadcast(database: Database, clientId: string, id: string): Promise<BroadcastView> {
  try {
    await database.sql`update broadcasts set status = 'cancelled', finished_at = now(), updated_at = now()
      where id = ${id} and client_id = ${clientId} and status = 'expanding'`;
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  return getBroadcast(database, clientId, id);
}
