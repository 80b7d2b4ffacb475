import { type Channel, newId, type Priority, partitionOf } from "@notify/core";
import { asLaneNotification, type LaneNotification } from "../accept/lane-message.js";
import type { Database } from "../pool.js";

/**
 * The most of its items' data a digest's notification carries, serialized: it travels on a lane
 * message, and NATS refuses a message over its max_payload (1 MiB by default). Items past it are
 * counted in `count` and `omitted`, not listed.
 */
export const DIGEST_DATA_MAX_BYTES = 256 * 1024;

interface ItemRow {
  digest_id: string;
  id: string;
  category: string;
  priority: Priority;
  requested_channels: Channel[] | null;
  template_version: number | null;
  data: Record<string, unknown>;
}

/** A digest's notification data: each item's data in accept order, as many as fit, and the count. */
export function digestData(items: ReadonlyArray<Record<string, unknown>>, maxBytes = DIGEST_DATA_MAX_BYTES) {
  const kept: Array<Record<string, unknown>> = [];
  let bytes = 0;
  for (const data of items) {
    const size = Buffer.byteLength(JSON.stringify(data)) + 1;
    if (bytes + size > maxBytes) break;
    kept.push(data);
    bytes += size;
  }
  return { items: kept, count: items.length, omitted: items.length - kept.length };
}

/**
 * Sends the digests that are due (their window ended, or they filled up): for each, in one
 * transaction, a notification of its own is stored (the client, user and template of its key;
 * the category, priority and channels of its first item, the template version of its last; data
 * `{items, count, omitted}` with the items in accept order) and the digest is marked sent with
 * it. The due rows are taken FOR UPDATE SKIP LOCKED, the lock a join takes too, so processors
 * share the work, each digest is sent by one of them once, and no item joins one being sent.
 * Answers the new notifications' lane messages: the caller publishes them after the commit (a
 * publish lost to a crash is the reconciler's, which routes any stored notification with no
 * outcome).
 */
export async function sendDueDigests(
  database: Database,
  options: { now: Date; limit: number; partitions: number },
): Promise<LaneNotification[]> {
  return database.sql.begin(async (tx) => {
    const due = await tx<{ id: string; client_id: string; user_id: string; template_id: string; key: string }[]>`
      select id, client_id, user_id, template_id, key from digests
      where status <> 'sent' and closes_at <= ${options.now}
      order by closes_at, id limit ${options.limit}
      for update skip locked`;
    if (due.length === 0) return [];
    const items = await tx<ItemRow[]>`
      select i.digest_id, n.id, n.category, n.priority, n.requested_channels, n.template_version, n.data
      from digest_items i join notifications n on n.id = i.notification_id
      where i.digest_id = any(${due.map((d) => d.id)}::text[]) and i.canceled_at is null
      order by i.digest_id, n.id`;
    const byDigest = new Map<string, ItemRow[]>();
    for (const item of items) {
      const list = byDigest.get(item.digest_id) ?? [];
      list.push(item);
      byDigest.set(item.digest_id, list);
    }
    const sent: LaneNotification[] = [];
    for (const digest of due) {
      const list = byDigest.get(digest.id) ?? [];
      const first = list[0];
      const last = list.at(-1);
      if (!first || !last) {
        // Every item was removed since (retention, a cancel): nothing to send.
        await tx`update digests set status = 'sent', sent_at = ${options.now} where id = ${digest.id} and user_id = ${digest.user_id}`;
        continue;
      }
      const id = newId();
      const [row] = await tx`
        insert into notifications (id, client_id, user_id, category, template_id, template_version, priority,
                                   requested_channels, data, dedup_key, request_hash, partition, digest_of)
        values (${id}, ${digest.client_id}, ${digest.user_id}, ${first.category}, ${digest.template_id},
                ${last.template_version}, ${first.priority}, ${first.requested_channels as string[] | null}::text[],
                ${tx.json(digestData(list.map((i) => i.data)) as never)}, ${`digest:${digest.id}`}, 'digest',
                ${partitionOf(digest.user_id, options.partitions)}, ${digest.id})
        returning id, client_id, user_id, category, template_id, template_version, priority, requested_channels, data,
                  partition, created_at, deliver_by, send_at, digest, throttle, digest_of, trace_parent`;
      await tx`
        update digests set status = 'sent', sent_at = ${options.now}, notification_id = ${id} where id = ${digest.id} and user_id = ${digest.user_id}`;
      if (row) sent.push(asLaneNotification(row as never));
    }
    return sent;
  }) as Promise<LaneNotification[]>;
}

/**
 * Forgets digests sent more than `days` ago, a batch at a time (their items and notifications
 * go with retention's archive): answers how many.
 */
export async function purgeSentDigests(database: Database, days: number, batchSize = 5000): Promise<number> {
  const rows = await database.sql`
    delete from digests where id in (
      select id from digests where status = 'sent' and sent_at < now() - make_interval(days => ${days})
      limit ${batchSize})
    returning id`;
  return rows.length;
}
