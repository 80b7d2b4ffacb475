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

/**
 * The advisory lock class of the daily cap's counters (the second key is the hash of the user
 * id; a collision only makes two users' releases wait for each other). Other classes: 7266001
 * migrations, 7266002 broadcast counts, 7266003 role setup, 7266004 throttles, 7266005 inbox
 * stores.
 */
const CAP_LOCK = 7266006;

/**
 * Takes the cap locks of these users, in the order of the lock keys, before a transaction takes
 * slots of several users' caps (a deferral release, whose batch holds notifications of many
 * users in due order): two such transactions with users in common then take their counters one
 * after the other, instead of each holding one user's counter while waiting for another's the
 * other holds. A routing takes one user's slot, last, and waits for nothing while it holds it.
 * Held until the transaction ends.
 */
export async function lockCapCounters(tx: TransactionSql, userIds: readonly string[]): Promise<void> {
  if (userIds.length === 0) return;
  // The lock is called per row of the sorted subquery, so in that order.
  await tx`
    select pg_advisory_xact_lock(${CAP_LOCK}, k) from (
      select distinct hashtext(u) as k from unnest(${[...new Set(userIds)]}::text[]) as u order by k
    ) s`;
}

/** Drops cap counters of days before `cutoff` (YYYY-MM-DD); answers how many went. */
export async function purgeCapCounts(database: Database, cutoff: string): Promise<number> {
  const result = await database.sql`delete from promotional_daily_counts where day < ${cutoff}::date`;
  return result.count;
}
