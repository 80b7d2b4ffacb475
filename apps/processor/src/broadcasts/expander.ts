import type { Bus } from "@notify/bus";
import { type Channel, type LaneMessage, newId, partitionOf } from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";
import { every } from "../periodic.js";

export interface ExpanderDeps {
  database: Database;
  bus: Bus;
  log: Logger;
}

export interface Expander {
  /** Finishes the batch in hand, then stops. */
  stop(): Promise<void>;
}

interface BroadcastRow {
  id: string;
  client_id: string;
  audience_id: string;
  category: string;
  template_id: string;
  template_version: number | null;
  requested_channels: Channel[] | null;
  data: Record<string, unknown>;
  request_hash: string;
  cursor: string | null;
}

export type BatchResult =
  | { kind: "idle" }
  | { kind: "finished"; broadcastId: string }
  | { kind: "expanded"; count: number };

/**
 * Expands one batch of one broadcast (spec rule 11). In a single transaction it takes the
 * broadcast's row (SKIP LOCKED: several processors share broadcasts, never one batch), reads
 * the next members after the stored cursor in user id order, inserts their notifications and
 * recipient rows with one unnest statement each, and moves the cursor past them. A crash
 * before the commit leaves nothing and the batch is done again; after it, the cursor says the
 * batch is done: no member is skipped, none gets two (broadcast_recipients' key holds that too).
 *
 * The lane publishes follow the commit, as in ingest: the batch is listed in publish_outbox in
 * the same transaction, msg id = notification id, and a batch a crash or a failed publish left
 * in the outbox is republished by ingest's recovery sweep.
 */
export async function expandBatch(deps: ExpanderDeps, batchSize: number): Promise<BatchResult> {
  const { sql } = deps.database;
  const messages: LaneMessage[] = [];
  let outboxId = null as string | null;
  const partitions = deps.bus.naming.partitions;
  const result = await sql.begin(async (tx): Promise<BatchResult> => {
    const [broadcast] = await tx<BroadcastRow[]>`
      select id, client_id, audience_id, category, template_id, template_version, requested_channels, data,
        request_hash, cursor
      from broadcasts where status = 'expanding' order by created_at limit 1 for update skip locked`;
    if (!broadcast) return { kind: "idle" };
    const members = await tx<{ user_id: string }[]>`
      select user_id from audience_members
      where audience_id = ${broadcast.audience_id} and user_id > ${broadcast.cursor ?? ""}
      order by user_id limit ${batchSize}`;
    if (members.length === 0) {
      await tx`update broadcasts set status = 'expanded', finished_at = now(), updated_at = now() where id = ${broadcast.id}`;
      return { kind: "finished", broadcastId: broadcast.id };
    }
    const userIds = members.map((m) => m.user_id);
    const ids = userIds.map(() => newId());
    const rows = await tx<{ id: string; user_id: string; partition: number; created_at: Date }[]>`
      insert into notifications (id, client_id, user_id, category, template_id, template_version, priority,
        requested_channels, data, dedup_key, request_hash, partition)
      select id, ${broadcast.client_id}, user_id, ${broadcast.category}, ${broadcast.template_id},
        ${broadcast.template_version}, 'promotional', ${broadcast.requested_channels}::text[],
        ${sql.json(broadcast.data as never)}, ${`broadcast:${broadcast.id}:`} || user_id, ${broadcast.request_hash}, partition
      from unnest(${ids}::text[], ${userIds}::text[], ${userIds.map((u) => partitionOf(u, partitions))}::int[])
        as t(id, user_id, partition)
      returning id, user_id, partition, created_at`;
    await tx`insert into broadcast_recipients (broadcast_id, user_id, notification_id)
      select ${broadcast.id}, user_id, id from unnest(${userIds}::text[], ${ids}::text[]) as t(user_id, id)`;
    const [outbox] = await tx<{ id: string }[]>`
      insert into publish_outbox (notification_ids) values (${ids}::text[]) returning id::text`;
    outboxId = outbox?.id ?? null;
    await tx`update broadcasts set cursor = ${userIds.at(-1) as string}, expanded = expanded + ${userIds.length},
      updated_at = now() where id = ${broadcast.id}`;
    for (const row of rows) {
      messages.push({
        notification_id: row.id,
        client_id: broadcast.client_id,
        user_id: row.user_id,
        category: broadcast.category,
        template_id: broadcast.template_id,
        ...(broadcast.template_version === null ? {} : { template_version: broadcast.template_version }),
        priority: "promotional",
        channels: broadcast.requested_channels,
        data: broadcast.data,
        created_at: row.created_at.toISOString(),
      });
    }
    return { kind: "expanded", count: rows.length };
  });
  if (messages.length > 0) {
    // Published together: the publisher pipelines them on one ack inbox.
    const published = await Promise.allSettled(
      messages.map((m) =>
        deps.bus.publish(
          deps.bus.subjects.lane("promotional", partitionOf(m.user_id, partitions)),
          m,
          m.notification_id,
        ),
      ),
    );
    const done = published.filter((p) => p.status === "fulfilled").length;
    if (done === messages.length && outboxId !== null) {
      await sql`delete from publish_outbox where id = ${outboxId}::bigint`.catch((error: unknown) =>
        deps.log.warn({ err: error }, "settling the outbox failed; the recovery sweep will republish"),
      );
    } else {
      deps.log.warn(
        { unpublished: messages.length - done },
        "broadcast publishes failed; the recovery sweep retries them",
      );
    }
  }
  return result;
}

/**
 * The processor's broadcast loop: batch after batch while there is work, then a nap of
 * `intervalMs`. All state is in Postgres, so a restarted or second processor resumes exactly.
 */
export function startExpander(deps: ExpanderDeps, options: { intervalMs: number; batchSize: number }): Expander {
  return every(options.intervalMs, deps.log, "expanding broadcasts", async (isStopping) => {
    let result: BatchResult;
    do {
      result = await expandBatch(deps, options.batchSize);
      if (result.kind === "finished") deps.log.info({ broadcast_id: result.broadcastId }, "broadcast expanded");
    } while (!isStopping() && result.kind !== "idle");
  });
}
