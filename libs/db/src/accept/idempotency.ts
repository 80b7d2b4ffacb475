import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { idempotencyKeys } from "../schema/index.js";

// The idempotency guard of accepted requests: a retried request finds its record for the window's
// length. Records live in daily slots (schema/idempotency.ts): a claim writes a row in each UTC day
// its window overlaps, and a read looks in its own day's slot, so it touches one partition.

/** The dedup window: a retried request within it meets its first claim. */
export const DEDUP_WINDOW_HOURS = 24;

/** An idempotency record, and whether its notification is still listed in the outbox. */
export type IdempotencyRecord = RowPick<
  typeof idempotencyKeys,
  "client_id" | "key" | "request_hash" | "notification_id" | "created_at"
> & {
  /** Still listed in the outbox: its publish is in flight, or left for the recovery sweep. */
  unpublished: boolean;
};

/**
 * The records of these (client, key) pairs that exist; a pair without one is left out. A record is
 * read from today's slot, or else from the legacy table (records claimed before the guard was
 * partitioned).
 */
export async function findIdempotencyRecords(
  database: Database,
  keys: ReadonlyArray<{ clientId: string; key: string }>,
): Promise<IdempotencyRecord[]> {
  return database.sql<IdempotencyRecord[]>`
    with i as (
      select * from unnest(${keys.map((k) => k.clientId)}::text[], ${keys.map((k) => k.key)}::text[]) as i(client_id, key)
    ),
    found as (
      select k.client_id, k.key, k.request_hash, k.notification_id, k.created_at, 0 as rank
      from idempotency_keys k join i on k.client_id = i.client_id and k.key = i.key
      -- The slot of the statement's time (an inlined function of now(): the executor prunes by it).
      where k.slot = notify_idempotency_slot(now())
      union all
      select l.client_id, l.key, l.request_hash, l.notification_id, l.created_at, 1
      from idempotency_keys_legacy l join i on l.client_id = i.client_id and l.key = i.key
    )
    select distinct on (k.client_id, k.key) k.client_id, k.key, k.request_hash, k.notification_id, k.created_at,
      exists (select 1 from publish_outbox o where k.notification_id = any(o.notification_ids)) as unpublished
    from found k
    order by k.client_id, k.key, k.rank`;
}

/**
 * Deletes records past the dedup window from the guard's default partition (rows of days that had
 * no partition yet when they were claimed: the job that makes them was late), a bounded slice at a
 * time so that the purge never holds long locks against ingest. Answers how many were deleted. The
 * daily partitions are never purged row by row: each is dropped whole once its day has passed.
 */
export async function purgeExpiredIdempotencyKeys(
  database: Database,
  windowHours: number,
  limit = 5000,
): Promise<number> {
  const [row] = await database.sql<{ deleted: number }[]>`
    select notify_idempotency_purge(make_interval(hours => ${windowHours}), ${limit}) as deleted`;
  return row?.deleted ?? 0;
}
