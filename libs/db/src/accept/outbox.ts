import type { LaneMessage } from "@notify/core";
import { eachId, withinIds } from "../log-keys.js";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { publishOutbox } from "../schema/index.js";
import { asLaneNotification, type LaneRow } from "./lane-message.js";

/**
 * Keeps only `ids` listed in a batch's outbox row: the rest of its notifications were
 * published, and a retry of one of them must be a replay (200), in every process, not a 409.
 */
export async function narrowOutboxRow(database: Database, outboxId: string, ids: readonly string[]): Promise<void> {
  await database.sql`update publish_outbox set notification_ids = ${ids as string[]}::text[] where id = ${outboxId}::bigint`;
}

/**
 * Deletes notifications whose publish definitely failed, with their idempotency records (the
 * key is free again), but only while holding the batch's outbox row: if the recovery sweep holds
 * it, or already settled it, it may have published them, and they must stay. Answers how many
 * were deleted.
 */
export async function removeUnpublished(database: Database, outboxId: string, ids: readonly string[]): Promise<number> {
  const [row] = await database.sql<{ removed: number }[]>`
    with batch as (select id from publish_outbox where id = ${outboxId}::bigint for update skip locked),
    removed as (
      delete from notifications where id = any(${ids as string[]}::text[]) and exists (select 1 from batch)
        -- The range of the ids, which the log's partitions are pruned by (log-keys.ts).
        and ${withinIds(database.sql, "id", ids)}
      returning id, client_id, dedup_key
    ),
    -- The fallback chain is written with the notification (no foreign key cascades to it).
    chains as (
      delete from notification_fallbacks f using removed r
      where f.notification_id = r.id and ${withinIds(database.sql, "f.notification_id", ids)}
    ),
    -- Every slot's row of the claim (a few partitions' key indexes: this runs on a failed publish
    -- only), and its record in the legacy table if it was claimed there.
    released as (
      delete from idempotency_keys k using removed r
      where k.client_id = r.client_id and k.key = r.dedup_key and k.notification_id = r.id
    ),
    released_legacy as (
      delete from idempotency_keys_legacy k using removed r
      where k.client_id = r.client_id and k.key = r.dedup_key and k.notification_id = r.id
    )
    select count(*)::int as removed from removed`;
  return row?.removed ?? 0;
}

/**
 * Deletes settled outbox rows without waiting for the WAL flush: a delete lost in a crash only
 * makes the recovery sweep publish the batch again, which JetStream deduplicates by msg id, and
 * the request's own commit stays the only one it waits for. One statement, in a transaction of
 * its own: the setting made inside it (set_config, local) holds for that transaction's commit
 * and ends with it, so the pooled connection keeps synchronous commits; a transaction block
 * (begin, set local, delete, commit) costs four round trips for the same.
 */
export async function deleteSettledOutboxRows(database: Database, outboxIds: readonly string[]): Promise<void> {
  await database.sql`
    delete from publish_outbox
    where id = any(${outboxIds as string[]}::bigint[])
      and (select set_config('synchronous_commit', 'off', true)) is not null`;
}

/** A notification the outbox still lists: its lane message and the partition it goes to. */
export interface UnpublishedNotification {
  message: LaneMessage;
  partition: number;
  /** The ingest request's traceparent: the recovered publish joins its trace. */
  traceParent: string | null;
}

/** postgres.js returns bigint as text, so the id is read as text throughout. */
type OutboxRow = Omit<RowPick<typeof publishOutbox, "id" | "notification_ids">, "id"> & { id: string };

/**
 * The recovery sweep over the outbox: takes batches older than `graceMs` (at most `maxIds`
 * notifications), hands their notifications to `publish`, which answers the ids whose publish
 * failed, and then deletes each batch row whose notifications were all published (or are gone)
 * and narrows the others to those still to publish, so a failure never makes the next sweep
 * publish the rest of its batch again. The rows stay locked (SKIP LOCKED) until then, so several
 * processes sweep at once without publishing twice. Answers how many were published.
 */
export async function sweepPublishOutbox(
  database: Database,
  options: { graceMs: number; maxIds: number },
  publish: (notifications: UnpublishedNotification[]) => Promise<ReadonlySet<string>>,
): Promise<number> {
  return database.sql.begin(async (tx) => {
    const batches = await tx<OutboxRow[]>`
      select id::text, notification_ids from publish_outbox
      where created_at < now() - ${`${options.graceMs} milliseconds`}::interval
      order by id limit 20 for update skip locked`;
    const work: Array<{ id: string; taken: string[]; rest: string[] }> = [];
    let budget = options.maxIds;
    for (const batch of batches) {
      if (budget <= 0) break;
      const taken = batch.notification_ids.slice(0, budget);
      work.push({ id: batch.id, taken, rest: batch.notification_ids.slice(taken.length) });
      budget -= taken.length;
    }
    if (work.length === 0) return 0;
    const rows = await tx<LaneRow[]>`
      select n.id, n.client_id, n.user_id, n.category, n.template_id, n.template_version, n.priority, n.requested_channels, n.data,
        n.partition, n.created_at, n.deliver_by, n.send_at, n.digest, n.throttle, n.digest_of, n.trace_parent
      from ${eachId(
        tx,
        work.flatMap((w) => w.taken),
      )} k
      -- Each looked up by its id, in its own partition (log-keys.ts).
      cross join lateral (select * from notifications n where n.id = k.id offset 0) n
      order by n.created_at, n.id`;
    const failed = await publish(
      rows.map((row) => {
        const { message, partition, traceParent } = asLaneNotification(row);
        return { message, partition, traceParent };
      }),
    );
    const settled: string[] = [];
    for (const w of work) {
      const left = [...w.taken.filter((id) => failed.has(id)), ...w.rest];
      if (left.length === 0) settled.push(w.id);
      else if (left.length < w.taken.length + w.rest.length)
        await tx`update publish_outbox set notification_ids = ${left}::text[] where id = ${w.id}::bigint`;
    }
    if (settled.length > 0) await tx`delete from publish_outbox where id = any(${settled}::bigint[])`;
    return rows.filter((row) => !failed.has(row.id)).length;
  });
}
