import type { Database } from "./index.js";

export interface BroadcastProgress {
  broadcast_id: string;
  audience_id: string;
  /** expanding, expanded or cancelled. */
  status: string;
  category: string;
  template_id: string;
  /** Audience members when the broadcast was accepted. */
  total: number;
  /** Recipients given their notification so far. */
  expanded: number;
  /** Recipients whose every channel was suppressed by their preferences. */
  suppressed: number;
  /** Recipients delivered on at least one channel. */
  delivered: number;
  /** Recipients not delivered anywhere with at least one failed or bounced channel. */
  failed: number;
  created_at: string;
  finished_at: string | null;
}

/**
 * A broadcast's progress, counted from its recipients' channel results (each recipient once,
 * by the best thing that happened to it). With `clientId`, only that client's broadcast is
 * found (the API); without, any (the operator CLI). Null when there is none.
 */
export async function readBroadcastProgress(
  database: Database,
  id: string,
  clientId?: string,
): Promise<BroadcastProgress | null> {
  const { sql } = database;
  const [row] = await sql<
    Array<{
      id: string;
      audience_id: string;
      status: string;
      category: string;
      template_id: string;
      total: number;
      expanded: number;
      created_at: Date;
      finished_at: Date | null;
    }>
  >`select id, audience_id, status, category, template_id, total::float8 as total, expanded::float8 as expanded,
      created_at, finished_at
    from broadcasts where id = ${id} ${clientId === undefined ? sql`` : sql`and client_id = ${clientId}`}`;
  if (!row) return null;
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
}
