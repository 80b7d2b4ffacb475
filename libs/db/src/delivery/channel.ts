import type { ChannelStatus } from "@notify/core";
import { GATHER, perIterationOf, unnestColumns } from "../batch.js";
import { type ChannelRef, refKey } from "../channel-ref.js";
import type { Sql } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { notificationChannels } from "../schema/index.js";

// The channel a work item names, as its worker reads it before a send.

export type DeliveryChannelRow = Omit<
  RowPick<typeof notificationChannels, "status" | "attempts" | "attempts_before_replay">,
  "status"
> & { status: ChannelStatus };

/**
 * A channel's delivery state, undefined when it has no row. The reads of one event-loop
 * iteration on one pool go in one statement.
 */
export const loadChannel: (sql: Sql, ref: ChannelRef) => Promise<DeliveryChannelRow | undefined> = perIterationOf(
  async (sql: Sql, refs: readonly ChannelRef[]) => {
    const keys = unnestColumns(sql, "k", {
      notification_id: ["text", refs.map((r) => r.notification_id)],
      channel: ["text", refs.map((r) => r.channel)],
    });
    const rows = await sql<Array<DeliveryChannelRow & ChannelRef>>`
      select k.notification_id, k.channel, c.status, c.attempts, c.attempts_before_replay
      from ${keys} cross join lateral (
        select c.status, c.attempts, c.attempts_before_replay from notification_channels c
        where c.notification_id = k.notification_id and c.channel = k.channel
        -- A lookup by key per channel, kept as it is (offset 0): joined, a plan made while the
        -- table was nearly empty would hash the whole table on every read as it grows.
        offset 0
      ) c`;
    const found = new Map(
      rows.map(({ status, attempts, attempts_before_replay, ...ref }) => [
        refKey(ref),
        { status, attempts, attempts_before_replay },
      ]),
    );
    return refs.map((ref) => found.get(refKey(ref)));
  },
  GATHER,
);
