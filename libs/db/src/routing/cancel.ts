import type { Channel, ChannelStatus } from "@notify/core";
import { lockChannels } from "../lock-order.js";
import type { Database } from "../pool.js";

/** One channel of a notification being canceled, as the cancel's transaction locked it. */
export interface CancelableChannel {
  channel: Channel;
  status: ChannelStatus;
}

/** What a cancel may do inside its transaction, on the rows it holds. */
export interface CancelTransaction {
  /** The notification's channels, each row locked until the commit. */
  channels: readonly CancelableChannel[];
  /** Its deferral timer was there, and is locked: no release takes it meanwhile. */
  timer: boolean;
  /**
   * Moves `channels` to canceled (only those still waiting: status only moves forward), each
   * with its history row, and drops the deferral timer once no channel is deferred. Answers the
   * channels moved.
   */
  cancel(channels: readonly Channel[], reason: string, history: string): Promise<Channel[]>;
}

/**
 * Runs a cancel of notification `id` of client `clientId` in one transaction: null when the
 * client has no such notification, `routed: false` when it has no channel row yet (its lane
 * message is on its way: nothing is written then). Otherwise, in the order every writer locks a
 * notification's rows (lock-order.ts), it ends the notification's open fallback chain (no
 * channel is added after a cancel; the end asks the webhook dispatcher whether the notification
 * is completed, as endFallback does), locks its deferral timer FOR UPDATE (a release in progress
 * holds it SKIP LOCKED: the cancel waits for it, then sees what it left), locks its channel rows,
 * and hands them to `work`, which decides and moves them before the commit.
 */
export async function cancelNotification<T>(
  database: Database,
  target: { id: string; clientId: string },
  work: (ops: CancelTransaction) => Promise<T>,
): Promise<{ routed: false } | { routed: true; result: T } | null> {
  const { id, clientId } = target;
  const result = await database.sql.begin(async (tx) => {
    const [head] = await tx<{ routed: boolean; user_id: string }[]>`
      select exists (select 1 from notification_channels c where c.notification_id = n.id) as routed, n.user_id
      from notifications n where n.id = ${id} and n.client_id = ${clientId}`;
    if (!head) return null;
    if (!head.routed) return { routed: false as const };
    // The notification's user: every statement after the first names it.
    const userId = head.user_id;
    await tx`
      with ended as (
        update notification_fallbacks set done_at = now()
        where notification_id = ${id} and done_at is null
        returning notification_id)
      insert into webhook_completion_checks (notification_id, user_id)
      select e.notification_id, n.user_id from ended e join notifications n on n.id = e.notification_id and n.user_id = ${userId}
      where webhook_wanted(n.client_id, 'notification.completed')
        or exists (select 1 from broadcast_recipients r
          join webhook_broadcast_tallies t on t.broadcast_id = r.broadcast_id and t.completed_at is null
          where r.notification_id = e.notification_id and r.user_id = ${userId})
      -- Updated, not passed over: held locked until the commit, so the dispatcher cannot take it
      -- and drop it before this change is visible (migration 0026).
      on conflict (notification_id) do update set user_id = excluded.user_id`;
    const timer = await tx`
      select 1 from deferred_notifications where notification_id = ${id} and user_id = ${userId} for update`;
    const channels = await lockChannels(
      tx,
      tx`select c.notification_id, c.channel, c.status from notification_channels c where c.notification_id = ${id}`,
    );
    const value = await work({
      channels: channels.map((c) => ({ channel: c.channel as Channel, status: c.status as ChannelStatus })),
      timer: timer.length > 0,
      async cancel(chosen, reason, history) {
        if (chosen.length === 0) return [];
        // With their history rows, as every status move after routing has.
        const moved = await tx<{ channel: Channel }[]>`
          with moved as (
            update notification_channels c
            set status = 'canceled', reason = ${reason}, next_attempt_at = null, updated_at = now()
            where c.notification_id = ${id} and c.channel = any(${chosen as Channel[]}::text[])
              and c.status in ('pending', 'deferred', 'retrying', 'parked')
            returning c.notification_id, c.channel, c.status, c.attempts, c.provider_id, c.updated_at
          ), history as (
            insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at, user_id)
            select notification_id, channel, status, ${history}, attempts, provider_id, updated_at, ${userId}::text from moved
          )
          select channel from moved order by channel`;
        await tx`
          delete from deferred_notifications d where d.notification_id = ${id} and d.user_id = ${userId}
            and not exists (select 1 from notification_channels c
              where c.notification_id = ${id} and c.status = 'deferred')`;
        return moved.map((m) => m.channel);
      },
    });
    return { routed: true as const, result: value };
  });
  return result as { routed: false } | { routed: true; result: T } | null;
}
