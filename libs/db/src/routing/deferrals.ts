import type { Channel, ChannelStatus, Priority } from "@notify/core";
import { withinIds } from "../log-keys.js";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { notifications } from "../schema/index.js";
import { routedReason } from "./channels.js";
import { type CapSlot, lockCapCounters, takeCapSlot } from "./daily-cap.js";
import {
  lockThrottles,
  returnThrottleSlot,
  type ThrottleTake,
  type ThrottleTaken,
  takeThrottleSlot,
} from "./throttle.js";

/** A deferred notification whose planned time has come, with its still-deferred channels. */
export type DueDeferral = Omit<
  RowPick<
    typeof notifications,
    | "client_id"
    | "user_id"
    | "category"
    | "template_id"
    | "template_version"
    | "priority"
    | "data"
    | "created_at"
    | "digest"
    | "throttle"
    | "digest_of"
  >,
  "priority" | "data"
> & {
  notification_id: string;
  priority: Priority;
  data: Record<string, unknown>;
  channels: Channel[];
  /** ISO 8601, or null: no deadline. */
  deliver_by: string | null;
  /** When it came due: with its id, where the next batch of a round starts. */
  due_at: Date;
};

/** Where a round of releases stands: past this timer (its due time and id); null: from the start. */
export type DuePosition = { dueAt: Date; id: string } | null;

/**
 * Due deferrals, oldest first: read before the release transaction, as routing uses other
 * connections. The due rows are taken first, alone, in the timer index's order up to the limit;
 * each one's notification and channels are then looked up by key, in subqueries the planner keeps
 * as they are (`offset 0`), the channels' status filtered outside. Written as one join, the
 * generic plan a fresh database gets hashes every notification and intersects each one's
 * channels with the reconciler's index of every waiting channel (300-600 ms a batch of 500 with
 * 40,000 due at once). A round of batches passes `after`, the last timer of its previous batch,
 * so each batch's index scan starts where the last one ended instead of stepping over every
 * timer the round has already released and deleted.
 */
export async function listDueDeferrals(
  database: Database,
  now: Date,
  limit: number,
  after: DuePosition = null,
): Promise<DueDeferral[]> {
  const { sql } = database;
  return sql<DueDeferral[]>`
    with due as materialized (
      select notification_id, due_at from deferred_notifications
      where due_at <= ${now}
        ${after === null ? sql`` : sql`and (due_at, notification_id) > (${after.dueAt}, ${after.id})`}
      order by due_at, notification_id limit ${limit}
    )
    select d.notification_id, d.due_at, n.client_id, n.user_id, n.category, n.template_id, n.template_version, n.priority, n.data,
           n.created_at, n.digest, n.throttle, n.digest_of,
           to_char(n.deliver_by at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as deliver_by,
           array(select c.channel from (
                   select c.channel, c.status from notification_channels c
                   where c.notification_id = d.notification_id offset 0
                 ) c where c.status = 'deferred' order by c.channel) as channels
    from due d cross join lateral (
      select * from notifications n where n.id = d.notification_id offset 0
    ) n
    order by d.due_at, d.notification_id`;
}

/**
 * A released channel that is not sent: its new status (suppressed, failed, expired, or deferred
 * again); `detail` as RoutedChannel's, for its history row.
 */
export interface ReleasedChannel {
  notificationId: string;
  channel: Channel;
  status: ChannelStatus;
  reason: string | null;
  nextAttemptAt: Date | null;
  detail?: string | null;
}

/** What a release may do inside its transaction, on the rows it holds. */
export interface DeferralRelease {
  /** Due notifications this release holds the lock of. */
  locked: ReadonlySet<string>;
  /** Whether the channel is still deferred (an operator or worker may have moved it meanwhile). */
  isDeferred(notificationId: string, channel: Channel): boolean;
  takeCapSlot(slot: CapSlot): Promise<boolean>;
  /** Takes a slot of the notification's throttle (takeThrottleSlot); before the cap, as routing does. */
  takeThrottleSlot(take: ThrottleTake): Promise<ThrottleTaken>;
  /** Gives back a slot taken in this release (the cap stopped the notification). */
  returnThrottleSlot(take: ThrottleTake): Promise<void>;
  /** Settles released channels; only one still deferred moves (status only moves forward). */
  settleChannels(updates: readonly ReleasedChannel[]): Promise<void>;
  /** Moves the timers of notifications deferred again. */
  redefer(timers: ReadonlyArray<{ notificationId: string; until: Date }>): Promise<void>;
  /** Drops the timers of notifications fully released. */
  finish(notificationIds: readonly string[]): Promise<void>;
}

/**
 * Runs one release of `due` deferrals in a transaction. It takes the due rows FOR UPDATE SKIP
 * LOCKED, so processors share the work and each row is settled by one of them, their deferred
 * channels FOR UPDATE, and the locks of their throttles' keys and of their users' daily caps;
 * `release` then settles them and publishes before the commit, so a crash in between leaves the
 * rows due and they are released again. Null when another release holds every row.
 */
export async function releaseDeferrals<T>(
  database: Database,
  due: readonly string[],
  now: Date,
  release: (ops: DeferralRelease) => Promise<T>,
): Promise<T | null> {
  const result = await database.sql.begin(async (tx) => {
    const held = await tx<{ notification_id: string; user_id: string }[]>`
      select notification_id, user_id from deferred_notifications
      where notification_id = any(${due as string[]}) and due_at <= ${now}
      for update skip locked`;
    const locked = new Set(held.map((r) => r.notification_id));
    if (locked.size === 0) return null;
    const stillDeferred = new Set(
      (
        await tx<{ notification_id: string; channel: Channel }[]>`
          select notification_id, channel from notification_channels
          -- By key alone: with a plain status = 'deferred', a generic plan intersects the keys with
          -- the reconciler's index of every waiting channel (a million entries read per batch
          -- with a million scheduled); the || '' keeps that index out.
          where notification_id = any(${[...locked]}) and status || '' = 'deferred'
            -- Their range of ids, which the log's partitions are pruned by (log-keys.ts).
            and ${withinIds(tx, "notification_id", [...locked])}
          -- In key order, as every writer locks channel rows (lock-order.ts).
          order by notification_id, channel
          for update`
      ).map((r) => `${r.notification_id} ${r.channel}`),
    );
    // Every throttle lock the release may take, at once and in one order (lockThrottles).
    await lockThrottles(tx, [...locked]);
    // And the daily cap's counters of their users, in one order too (lockCapCounters).
    await lockCapCounters(
      tx,
      held.map((r) => r.user_id),
    );
    return release({
      locked,
      isDeferred: (id, channel) => stillDeferred.has(`${id} ${channel}`),
      takeCapSlot: (slot) => takeCapSlot(tx, slot),
      takeThrottleSlot: (take) => takeThrottleSlot(tx, take),
      returnThrottleSlot: (take) => returnThrottleSlot(tx, take),
      async settleChannels(updates) {
        if (updates.length === 0) return;
        // With their history rows, as every status move after routing has.
        await tx`
          with moved as (
            update notification_channels c
            set status = u.status, reason = u.reason, next_attempt_at = u.next_attempt_at, updated_at = now()
            from unnest(${updates.map((u) => u.notificationId)}::text[], ${updates.map((u) => u.channel)}::text[],
                        ${updates.map((u) => u.status)}::text[], ${updates.map((u) => u.reason) as string[]}::text[],
                        ${updates.map((u) => u.nextAttemptAt?.toISOString() ?? null) as string[]}::timestamptz[],
                        ${updates.map(routedReason) as string[]}::text[])
                 as u(notification_id, channel, status, reason, next_attempt_at, history)
            where c.notification_id = u.notification_id and c.channel = u.channel and c.status = 'deferred'
              and ${withinIds(
                tx,
                "c.notification_id",
                updates.map((u) => u.notificationId),
              )}
            returning c.notification_id, c.channel, c.status, u.history, c.attempts, c.provider_id, c.updated_at, c.user_id
          )
          insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at, user_id)
          select notification_id, channel, status, history, attempts, provider_id, updated_at, user_id from moved`;
      },
      async redefer(timers) {
        if (timers.length === 0) return;
        await tx`
          update deferred_notifications d set due_at = u.due_at
          from unnest(${timers.map((r) => r.notificationId)}::text[], ${timers.map((r) => r.until.toISOString())}::timestamptz[])
               as u(notification_id, due_at)
          where d.notification_id = u.notification_id`;
      },
      async finish(ids) {
        if (ids.length > 0)
          await tx`delete from deferred_notifications where notification_id = any(${ids as string[]})`;
      },
    });
  });
  return result as T | null;
}
