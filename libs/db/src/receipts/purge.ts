import type { Sql } from "../pool.js";

/**
 * Deletes receipts that name no notification of the log (stored with a null notification id, in
 * the default partition, or from before the log's partitions, '' in the first) and never matched
 * a send (never applied) and arrived more than `olderThanHours` ago, at most `limit` per call
 * (oldest first, SKIP LOCKED so a concurrent sweep applying one is never blocked and never loses
 * it). Answers how many were deleted. A receipt that names a notification is not deleted here: it
 * is retired with its notification's partition of the log (the pending sweep no longer tries it
 * once it is older than the same hours), or, in the default and first partitions, with its
 * notification by retention's row path. Applied receipts stay: they are the dedup record of what
 * moved a channel.
 */
export async function purgeUnmatchedReceipts(
  sql: Sql,
  options: { olderThanHours: number; limit?: number },
): Promise<number> {
  const rows = await sql`
    delete from provider_receipts r
    using (
      select provider, event_id, notification_id from provider_receipts
      -- The default and first partitions alone (the partition key's own conditions).
      where (notification_id is null or notification_id = '')
        and applied_at is null and received_at < now() - make_interval(hours => ${options.olderThanHours})
      order by received_at, event_id
      limit ${options.limit ?? 1000}
      for update skip locked
    ) due
    where (r.notification_id is null or r.notification_id = '')
      and r.provider = due.provider and r.event_id = due.event_id
      and r.notification_id is not distinct from due.notification_id and r.applied_at is null
    returning r.event_id`;
  return rows.length;
}
