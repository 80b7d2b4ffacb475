import type { TransactionSql } from "postgres";
import type { Database, Sql } from "../pool.js";

/** The daily promotional cap a routing counts against, when it does. */
export interface CapSlot {
  userId: string;
  day: string;
  cap: number;
}

/**
 * Takes one of the user's promotional sends of `day` if the cap allows: one conditional upsert,
 * so concurrent routings (several partitions' workers, several processors) can never go past
 * the cap, and the count survives restarts. It runs in the transaction that records the
 * channels, so a crash between the two neither loses nor double-counts a send.
 */
export async function takeCapSlot(sql: Sql | TransactionSql, slot: CapSlot): Promise<boolean> {
  if (slot.cap <= 0) return false;
  const rows = await sql`
    insert into promotional_daily_counts as c (user_id, day, count) values (${slot.userId}, ${slot.day}, 1)
    on conflict (user_id, day) do update set count = c.count + 1 where c.count < ${slot.cap}
    returning count`;
  return rows.length > 0;
}

/** Drops cap counters of days before `cutoff` (YYYY-MM-DD); answers how many went. */
export async function purgeCapCounts(database: Database, cutoff: string): Promise<number> {
  const result = await database.sql`delete from promotional_daily_counts where day < ${cutoff}::date`;
  return result.count;
}
