import type { Sql } from "../pool.js";

/**
 * Deletes receipts that never matched a send (never applied) and arrived more than
 * `olderThanHours` ago, at most `limit` per call (oldest first, SKIP LOCKED so a concurrent
 * sweep applying one is never blocked and never loses it). Answers how many were deleted.
 * Applied receipts stay: they are the dedup record of what moved a channel.
 */
export async function purgeUnmatchedReceipts(
  sql: Sql,
  options: { olderThanHours: number; limit?: number },
): Promise<number> {
  const rows = await sql`
    delete from provider_receipts r
    using (
      select provider, event_id from provider_receipts
      where applied_at is null and received_at < now() - make_interval(hours => ${options.olderThanHours})
      order by received_at, event_id
      limit ${options.limit ?? 1000}
      for update skip locked
    ) due
    where r.provider = due.provider and r.event_id = due.event_id and r.applied_at is null
    returning r.event_id`;
  return rows.length;
}
