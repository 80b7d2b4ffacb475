import type { Bus } from "@notify/bus";
import type { LaneMessage, Priority } from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";

/**
 * The recovery path of invariant 1: batches left in the outbox (a crash or a NATS failure
 * between commit and ack) are published again. The lane msg id is the notification id, so a
 * row whose first publish did land is deduplicated by JetStream, and past the duplicate window
 * the processor's routing is idempotent. At most `maxIds` notifications a sweep (a broadcast's
 * batch may list thousands); a batch row goes when every one of its notifications is published
 * (or gone), and otherwise keeps only those still to publish, so a failure never makes the
 * sweep publish the rest of its batch again. SKIP LOCKED lets several ingest processes sweep
 * at once.
 */
export async function recoverUnpublished(
  deps: { database: Database; bus: Bus; log: Logger },
  graceMs: number,
  maxIds = 2000,
): Promise<number> {
  if (!deps.bus.isConnected()) return 0;
  const { sql } = deps.database;
  return sql.begin(async (tx) => {
    const batches = await tx<{ id: string; notification_ids: string[] }[]>`
      select id::text, notification_ids from publish_outbox
      where created_at < now() - ${`${graceMs} milliseconds`}::interval
      order by id limit 20 for update skip locked`;
    const work: Array<{ id: string; taken: string[]; rest: string[] }> = [];
    let budget = maxIds;
    for (const batch of batches) {
      if (budget <= 0) break;
      const taken = batch.notification_ids.slice(0, budget);
      work.push({ id: batch.id, taken, rest: batch.notification_ids.slice(taken.length) });
      budget -= taken.length;
    }
    if (work.length === 0) return 0;
    const rows = await tx<
      Array<{
        id: string;
        client_id: string;
        user_id: string;
        category: string;
        template_id: string;
        template_version: number | null;
        priority: Priority;
        requested_channels: LaneMessage["channels"];
        data: Record<string, unknown>;
        partition: number;
        created_at: Date;
      }>
    >`select id, client_id, user_id, category, template_id, template_version, priority, requested_channels, data, partition, created_at
      from notifications where id = any(${work.flatMap((w) => w.taken)}::text[])
      order by created_at, id`;
    const outcomes = await Promise.allSettled(
      rows.map((row) => {
        const message: LaneMessage = {
          notification_id: row.id,
          client_id: row.client_id,
          user_id: row.user_id,
          category: row.category,
          template_id: row.template_id,
          ...(row.template_version === null ? {} : { template_version: row.template_version }),
          priority: row.priority,
          channels: row.requested_channels,
          data: row.data,
          created_at: row.created_at.toISOString(),
        };
        return deps.bus.publish(deps.bus.subjects.lane(row.priority, row.partition), message, row.id);
      }),
    );
    const failed = new Set<string>();
    outcomes.forEach((outcome, i) => {
      if (outcome.status === "rejected") failed.add(rows[i]?.id as string);
    });
    if (failed.size > 0) {
      deps.log.warn({ count: failed.size, err: firstError(outcomes) }, "recovery publishes failed; will retry");
    }
    const settled: string[] = [];
    for (const w of work) {
      const left = [...w.taken.filter((id) => failed.has(id)), ...w.rest];
      if (left.length === 0) settled.push(w.id);
      else if (left.length < w.taken.length + w.rest.length)
        await tx`update publish_outbox set notification_ids = ${left}::text[] where id = ${w.id}::bigint`;
    }
    if (settled.length > 0) await tx`delete from publish_outbox where id = any(${settled}::bigint[])`;
    const published = rows.length - failed.size;
    if (published > 0) deps.log.info({ count: published }, "recovered unpublished notifications");
    return published;
  });
}

const firstError = (outcomes: PromiseSettledResult<unknown>[]) =>
  outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected")?.reason;

/**
 * Deletes idempotency records past the dedup window, a bounded slice at a time so that the
 * purge never holds long locks against ingest.
 */
export async function purgeExpiredKeys(database: Database, windowHours: number, limit = 5000): Promise<number> {
  const result = await database.sql`
    delete from idempotency_keys where ctid in (
      select ctid from idempotency_keys where created_at < now() - make_interval(hours => ${windowHours}) limit ${limit})`;
  return result.count;
}
