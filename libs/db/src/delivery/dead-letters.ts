import type { Channel, ChannelStatus } from "@notify/core";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { channelStatusEvents, notificationChannels, userContacts, userPreferences } from "../schema/index.js";

// Dead letters as the operator reads and replays them (@notify/ops, run by the processor's
// responder and the CLI): a channel's state and history, the user's reach now, and the reset
// that sends it again.

/** A dead-lettered channel's state now: what a replay decides on. */
export type ChannelState = RowPick<typeof notificationChannels, "notification_id" | "reason" | "attempts"> & {
  channel: Channel;
  status: ChannelStatus;
};

/** The states of these channels now; a channel whose notification is gone has none. */
export async function readChannelStates(
  database: Database,
  channels: ReadonlyArray<{ notificationId: string; channel: Channel }>,
): Promise<ChannelState[]> {
  if (channels.length === 0) return [];
  return database.sql<ChannelState[]>`
    select notification_id, channel, status, reason, attempts from notification_channels
    where (notification_id, channel) in (
      select * from unnest(${channels.map((c) => c.notificationId)}::text[], ${channels.map((c) => c.channel)}::text[]))`;
}

export type StatusEvent = RowPick<typeof channelStatusEvents, "status" | "reason" | "attempt" | "at">;

/** Every status a channel took, oldest first. */
export async function readStatusEvents(
  database: Database,
  notificationId: string,
  channel: Channel,
): Promise<StatusEvent[]> {
  return database.sql<StatusEvent[]>`
    select status, reason, attempt, at from channel_status_events
    where notification_id = ${notificationId} and channel = ${channel} order by id`;
}

type Nullable<T> = { [K in keyof T]: T[K] | null };

/** Where a user can be reached today and what they allow: null for what they never set. */
export type ReachProfile = Nullable<
  RowPick<typeof userContacts, "email" | "phone"> &
    RowPick<typeof userPreferences, "channel_optout" | "category_optout" | "quiet_hours" | "device_tokens">
>;

/** The user's contacts and preferences as they stand; every field null for a user never seen. */
export async function readReachProfile(database: Database, userId: string): Promise<ReachProfile | undefined> {
  const [row] = await database.sql<ReachProfile[]>`
    select c.email, c.phone, p.channel_optout, p.category_optout, p.quiet_hours, p.device_tokens
    from (select ${userId}::text as user_id) u
    left join user_contacts c on c.user_id = u.user_id
    left join user_preferences p on p.user_id = u.user_id`;
  return row;
}

/**
 * Puts a dead-lettered channel back to pending with a fresh retry budget (the one sanctioned
 * backward move), tagged with `reason` and logged in its status history in the same statement.
 * Only from one of `from`, and from pending only when that pending is an interrupted replay's
 * (same `reason`). False when the channel was not in such a state.
 */
export async function resetChannelForReplay(
  database: Database,
  target: { notificationId: string; channel: Channel; from: readonly ChannelStatus[]; reason: string },
): Promise<boolean> {
  const moved = await database.sql`
    with moved as (
      update notification_channels set status = 'pending', reason = ${target.reason},
        attempts_before_replay = attempts, next_attempt_at = null, updated_at = now()
      where notification_id = ${target.notificationId} and channel = ${target.channel} and status = any(${target.from as ChannelStatus[]})
        and (status <> 'pending' or reason = ${target.reason})
      returning notification_id, channel, status, reason, attempts, updated_at, user_id
    )
    insert into channel_status_events (notification_id, channel, status, reason, attempt, at, user_id)
    select notification_id, channel, status, reason, attempts, updated_at, user_id from moved`;
  return moved.count > 0;
}
