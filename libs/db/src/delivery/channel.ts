import type { ChannelStatus, SuppressionHold } from "@notify/core";
import { GATHER, perIterationOf, unnestColumns } from "../batch.js";
import { type ChannelRef, refKey } from "../channel-ref.js";
import { withinIds } from "../log-keys.js";
import type { Sql } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { notificationChannels } from "../schema/index.js";

// The channel a work item names, as its worker reads it before a send.

/**
 * `suppression`: the entry of the suppression list that holds for the address asked about
 * (for the notification's client or every client), when there is one.
 */
export type DeliveryChannelRow = Omit<
  RowPick<typeof notificationChannels, "status" | "attempts" | "attempts_before_replay">,
  "status"
> & { status: ChannelStatus; suppression?: SuppressionHold };

/**
 * A channel to read, its notification's user (the work item's), and the address it is about to
 * be sent to, as the suppression list keeps it (libs/core suppressionAddress), for a channel whose
 * addresses can be suppressed.
 */
export type DeliveryRef = ChannelRef & { user_id: string; address?: string | null };

const deliveryKey = (ref: DeliveryRef) => `${refKey(ref)}\u0000${ref.address ?? ""}`;

/**
 * A channel's delivery state, undefined when it has no row; with an address, whether the list
 * suppresses it for the notification's client, in the same statement (two lookups by key, only
 * for such an address). The reads of one event-loop iteration on one pool go in one statement.
 */
export const loadChannel: (sql: Sql, ref: DeliveryRef) => Promise<DeliveryChannelRow | undefined> = perIterationOf(
  async (sql: Sql, refs: readonly DeliveryRef[]) => {
    const ids = refs.map((r) => r.notification_id);
    const keys = unnestColumns(sql, "k", {
      notification_id: ["text", refs.map((r) => r.notification_id)],
      channel: ["text", refs.map((r) => r.channel)],
      address: ["text", refs.map((r) => r.address ?? null)],
      user_id: ["text", refs.map((r) => r.user_id)],
    });
    const rows = await sql<
      Array<
        Omit<DeliveryChannelRow, "suppression"> &
          DeliveryRef & { held_for: string | null; held_reason: string | null; held_since: Date | null }
      >
    >`
      select k.notification_id, k.channel, k.address, c.status, c.attempts, c.attempts_before_replay,
        s.client_id as held_for, s.reason as held_reason, s.created_at as held_since
      from ${keys} cross join lateral (
        select c.status, c.attempts, c.attempts_before_replay from notification_channels c
        where c.notification_id = k.notification_id and c.channel = k.channel and ${withinIds(sql, "c.notification_id", ids)}
        -- A lookup by key per channel, kept as it is (offset 0): joined, a plan made while the
        -- table was nearly empty would hash the whole table on every read as it grows.
        offset 0
      ) c
      left join lateral (
        select s.client_id, s.reason, s.created_at from suppressions s
        where k.address is not null and s.channel = k.channel and s.address = k.address
          and s.client_id in ('', (
            select n.client_id from notifications n
            where n.id = k.notification_id and n.user_id = k.user_id and ${withinIds(sql, "n.id", ids)}))
        order by s.created_at limit 1
      ) s on true`;
    const found = new Map(
      rows.map(({ status, attempts, attempts_before_replay, held_for, held_reason, held_since, ...ref }) => {
        const row: DeliveryChannelRow = { status, attempts, attempts_before_replay };
        if (held_for !== null && held_reason !== null && held_since !== null)
          row.suppression = {
            channel: ref.channel,
            client_id: held_for,
            reason: held_reason,
            created_at: held_since.toISOString(),
          };
        return [deliveryKey(ref), row];
      }),
    );
    return refs.map((ref) => found.get(deliveryKey(ref)));
  },
  GATHER,
);
