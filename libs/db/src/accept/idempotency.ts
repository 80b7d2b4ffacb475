import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { idempotencyKeys } from "../schema/index.js";

// The 24 h idempotency guard of accepted requests: a retried request finds its record, and
// records past the window go.

/** An idempotency record, and whether its notification is still listed in the outbox. */
export type IdempotencyRecord = RowPick<
  typeof idempotencyKeys,
  "client_id" | "key" | "request_hash" | "notification_id" | "created_at"
> & {
  /** Still listed in the outbox: its publish is in flight, or left for the recovery sweep. */
  unpublished: boolean;
};

/** The records of these (client, key) pairs that exist; a pair without one is left out. */
export async function findIdempotencyRecords(
  database: Database,
  keys: ReadonlyArray<{ clientId: string; key: string }>,
): Promise<IdempotencyRecord[]> {
  return database.sql<IdempotencyRecord[]>`
    select k.client_id, k.key, k.request_hash, k.notification_id, k.created_at,
      exists (select 1 from publish_outbox o where k.notification_id = any(o.notification_ids)) as unpublished
    from idempotency_keys k
    join unnest(${keys.map((k) => k.clientId)}::text[], ${keys.map((k) => k.key)}::text[]) as i(client_id, key)
      on k.client_id = i.client_id and k.key = i.key`;
}

/**
 * Deletes idempotency records past the dedup window, a bounded slice at a time so that the
 * purge never holds long locks against ingest. Answers how many were deleted.
 */
export async function purgeExpiredIdempotencyKeys(
  database: Database,
  windowHours: number,
  limit = 5000,
): Promise<number> {
  const result = await database.sql`
    delete from idempotency_keys where ctid in (
      select ctid from idempotency_keys where created_at < now() - make_interval(hours => ${windowHours}) limit ${limit})`;
  return result.count;
}
