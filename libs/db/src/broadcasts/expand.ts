import { type Channel, newId, partitionOf } from "@notify/core";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { broadcasts } from "../schema/index.js";

// The processor turns an expanding broadcast into notifications, batch by batch.

/** A notification created for one audience member, as the lane message needs it. */
export interface ExpandedRecipient {
  notification_id: string;
  user_id: string;
  /** The lane partition of its user (stored on the notification too). */
  partition: number;
}

/** The broadcast a batch expanded, as its lane messages need it. */
export type ExpandingBroadcast = Omit<
  RowPick<
    typeof broadcasts,
    "id" | "client_id" | "category" | "template_id" | "template_version" | "requested_channels" | "data"
  >,
  "requested_channels" | "data"
> & {
  requested_channels: Channel[] | null;
  data: Record<string, unknown>;
  /** Its recipients' deadline (ISO 8601): the template version's time to live from the broadcast's acceptance; null: none. */
  deliver_by: string | null;
};

export type ExpansionStep =
  | { kind: "idle" }
  | { kind: "finished"; broadcastId: string }
  | {
      kind: "expanded";
      broadcast: ExpandingBroadcast;
      recipients: ExpandedRecipient[];
      /** The batch's notifications' created_at: the transaction's now(), stored on each. */
      createdAt: Date;
      outboxId: string;
    };

type BroadcastRow = ExpandingBroadcast & { audience_id: string; request_hash: string; cursor: string | null };

/**
 * Expands one batch of one broadcast. In a single transaction it takes the broadcast's row
 * (SKIP LOCKED: several processors share broadcasts, never one batch), reads the next members
 * after the stored cursor in user id order, then in one statement inserts their notifications
 * and recipient rows, lists the batch in publish_outbox and moves the cursor past it. A crash
 * before the commit leaves nothing and the batch is done again; after it, the cursor says the
 * batch is done: no member is skipped, none gets two (broadcast_recipients' key holds that too).
 * A broadcast with no member left is marked expanded: all its notifications are stored and
 * listed in the outbox until published, though the last batch's publishes may still be in
 * flight (or left to the recovery sweep) when that commits.
 *
 * The batch's ids, users and partitions travel once, as three arrays the statement's parts
 * share, and nothing comes back per row: every notification of the batch has the
 * transaction's now() as created_at, which the statement answers once.
 *
 * `settled` are outbox rows of earlier batches whose publishes were all acknowledged: they are
 * deleted in the same transaction, which spares each batch a transaction of its own for that.
 * A row the recovery sweep holds is skipped, not waited for with the broadcast's row locked:
 * the sweep deletes it. If this transaction fails they stay, and the caller settles them
 * otherwise (or the recovery sweep republishes them, which JetStream deduplicates by msg id).
 */
export async function expandBroadcastBatch(
  database: Database,
  batchSize: number,
  partitions: number,
  settled: readonly string[] = [],
): Promise<ExpansionStep> {
  const { sql } = database;
  return sql.begin(async (tx): Promise<ExpansionStep> => {
    const [broadcast] = await tx<BroadcastRow[]>`
      with settled as (
        delete from publish_outbox where id in (
          select id from publish_outbox where id = any(${settled as string[]}::bigint[]) for update skip locked)
      )
      select b.id, b.client_id, b.audience_id, b.category, b.template_id, b.template_version, b.requested_channels,
        b.data, b.request_hash, b.cursor,
        to_char((b.created_at + v.ttl_seconds * interval '1 second') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
          as deliver_by
      from broadcasts b
      left join template_versions v on v.template_id = b.template_id and v.version = b.template_version
      where b.status = 'expanding' order by b.created_at limit 1 for update of b skip locked`;
    if (!broadcast) return { kind: "idle" };
    const members = await tx<{ user_id: string }[]>`
      select user_id from audience_members
      where audience_id = ${broadcast.audience_id} and user_id > ${broadcast.cursor ?? ""}
      order by user_id limit ${batchSize}`;
    if (members.length === 0) {
      await tx`update broadcasts set status = 'expanded', finished_at = now(), updated_at = now() where id = ${broadcast.id}`;
      return { kind: "finished", broadcastId: broadcast.id };
    }
    const recipients: ExpandedRecipient[] = new Array(members.length);
    const ids: string[] = new Array(members.length);
    const userIds: string[] = new Array(members.length);
    const parts: number[] = new Array(members.length);
    for (let i = 0; i < members.length; i++) {
      const userId = (members[i] as { user_id: string }).user_id;
      const recipient = { notification_id: newId(), user_id: userId, partition: partitionOf(userId, partitions) };
      recipients[i] = recipient;
      ids[i] = recipient.notification_id;
      userIds[i] = userId;
      parts[i] = recipient.partition;
    }
    const [written] = await tx<{ outbox_id: string; created_at: Date }[]>`
      with batch as (
        select * from unnest(${ids}::text[], ${userIds}::text[], ${parts}::int[]) as t(id, user_id, partition)
      ),
      inserted as (
        insert into notifications (id, client_id, user_id, category, template_id, template_version, priority,
          requested_channels, data, dedup_key, request_hash, partition, created_at, deliver_by)
        select id, ${broadcast.client_id}, user_id, ${broadcast.category}, ${broadcast.template_id},
          ${broadcast.template_version}, 'promotional', ${broadcast.requested_channels}::text[],
          ${sql.json(broadcast.data as never)}, ${`broadcast:${broadcast.id}:`} || user_id, ${broadcast.request_hash},
          partition, now(), ${broadcast.deliver_by}::timestamptz
        from batch
      ),
      recipients as (
        insert into broadcast_recipients (broadcast_id, user_id, notification_id)
        select ${broadcast.id}, user_id, id from batch
      ),
      outbox as (
        insert into publish_outbox (notification_ids) select array_agg(id) from batch returning id
      ),
      moved as (
        update broadcasts set cursor = ${userIds.at(-1) as string}, expanded = expanded + ${userIds.length},
          updated_at = now()
        where id = ${broadcast.id}
      )
      select (select id from outbox)::text as outbox_id, now() as created_at`;
    const expanding: ExpandingBroadcast = {
      id: broadcast.id,
      client_id: broadcast.client_id,
      category: broadcast.category,
      template_id: broadcast.template_id,
      template_version: broadcast.template_version,
      requested_channels: broadcast.requested_channels,
      data: broadcast.data,
      deliver_by: broadcast.deliver_by,
    };
    if (!written) throw new Error("the batch statement answered no row");
    return {
      kind: "expanded",
      broadcast: expanding,
      recipients,
      createdAt: written.created_at,
      outboxId: written.outbox_id,
    };
  });
}
