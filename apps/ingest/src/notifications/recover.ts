import type { Bus } from "@notify/bus";
import type { LaneMessage, Priority } from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";

/**
 * The recovery path of invariant 1: rows committed but never marked published (a crash or a
 * NATS failure between commit and ack) are published again. The lane msg id is the
 * notification id, so a row whose first publish did land is deduplicated by JetStream, and
 * past the duplicate window the processor's routing is idempotent. SKIP LOCKED lets several
 * ingest processes sweep at once.
 */
export async function recoverUnpublished(
  deps: { database: Database; bus: Bus; log: Logger },
  graceMs: number,
  limit = 500,
): Promise<number> {
  if (!deps.bus.isConnected()) return 0;
  const { sql } = deps.database;
  return sql.begin(async (tx) => {
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
      from notifications
      where published_at is null and created_at < now() - ${`${graceMs} milliseconds`}::interval
      order by created_at limit ${limit} for update skip locked`;
    const published: string[] = [];
    for (const row of rows) {
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
      try {
        await deps.bus.publish(deps.bus.subjects.lane(row.priority, row.partition), message, row.id);
        published.push(row.id);
      } catch (error) {
        deps.log.warn({ err: error, notification_id: row.id }, "recovery publish failed; will retry");
        break;
      }
    }
    if (published.length > 0) {
      await tx`update notifications set published_at = now() where id = any(${published})`;
      await tx`update idempotency_keys set state = 'done' where notification_id = any(${published})`;
      deps.log.info({ count: published.length }, "recovered unpublished notifications");
    }
    return published.length;
  });
}

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
