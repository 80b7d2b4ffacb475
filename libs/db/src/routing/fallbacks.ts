import type { Channel, ChannelStatus, FallbackCondition, FallbackStep, Priority } from "@notify/core";
import type { Database } from "../pool.js";
import type { TakenFallback } from "../schema/index.js";
import { routedReason } from "./channels.js";

/** An open fallback chain whose watched channel has an outcome (or whose wait for a receipt ended). */
export interface OpenFallback {
  notification_id: string;
  user_id: string;
  steps: FallbackStep[];
  next_step: number;
  watching: Channel;
  confirm_by: Date | null;
  /** The watched channel's status, its reason and the provider that took its send. */
  status: ChannelStatus;
  reason: string | null;
  provider: string | null;
  /** A `delivered` receipt of the provider that took the watched channel's send is stored. */
  confirmed: boolean;
}

/**
 * Open chains with something to decide, oldest first: the watched channel has left the waiting
 * statuses; one that was sent is looked at when first seen, when a receipt confirmed it, and
 * when the step's wait is over (a bounce moves it out of delivered, so it is seen then too).
 */
export async function listOpenFallbacks(database: Database, now: Date, limit: number): Promise<OpenFallback[]> {
  return database.sql<OpenFallback[]>`
    select f.notification_id, n.user_id, f.steps, f.next_step, f.watching, f.confirm_by,
      c.status, c.reason, c.provider, receipt.confirmed
    from notification_fallbacks f
    join notification_channels c on c.notification_id = f.notification_id and c.channel = f.watching
    join notifications n on n.id = f.notification_id
    cross join lateral (
      select c.status in ('delivered', 'unsettled') and c.provider_id is not null and exists (
        select 1 from provider_receipts r
        where r.provider = c.provider and r.provider_id = c.provider_id and r.status = 'delivered'
          -- The chain's partition of the receipts, the default one (receipts that name no
          -- notification) and the first (from before the receipts were partitioned): see 0031.
          and (r.notification_id = f.notification_id or r.notification_id = '' or r.notification_id is null)) as confirmed
    ) receipt
    where f.done_at is null
      and c.status not in ('pending', 'deferred', 'retrying', 'parked')
      and (f.confirm_by is null or f.confirm_by <= ${now} or c.status not in ('delivered', 'unsettled')
           or receipt.confirmed)
    order by f.created_at limit ${limit}`;
}

/** Starts a step's wait for a receipt, once (the chain must still be at `step`). */
export async function startFallbackWait(database: Database, id: string, step: number, until: Date): Promise<void> {
  await database.sql`
    update notification_fallbacks set confirm_by = ${until}
    where notification_id = ${id} and next_step = ${step} and confirm_by is null and done_at is null`;
}

/**
 * Ends a chain at `step`: the watched channel reached the user, or failed in a way the step does
 * not cover. A notification's outcome waits for its open chain, and no channel changes when the
 * chain ends, so the end itself asks the webhook dispatcher to decide whether the notification is
 * completed, as a channel's outcome does (drizzle/0020's trigger: for an endpoint that wants
 * notification.completed, or a broadcast's tally that counts it). `userId`: the notification's
 * user (the open chain's).
 */
export async function endFallback(database: Database, id: string, userId: string, step: number): Promise<void> {
  await database.sql`
    with ended as (
      update notification_fallbacks set done_at = now()
      where notification_id = ${id} and next_step = ${step} and done_at is null
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
}

/** The next channel's outcome as routing decided it (`detail`: as RoutedChannel's). */
export interface FallbackChannel {
  channel: Channel;
  status: ChannelStatus;
  reason: string | null;
  nextAttemptAt: Date | null;
  detail?: string | null;
}

/**
 * Takes step `step` of a chain, exactly once: moves the chain on by compare-and-set and inserts
 * the next channel's row (with its deferral timer when quiet hours hold it) in one transaction.
 * Answers false when the chain was no longer at that step (another processor took it, or a
 * crashed run already did): then nothing is written.
 */
export async function takeFallbackStep(
  database: Database,
  take: {
    notificationId: string;
    userId: string;
    step: number;
    from: Channel;
    because: FallbackCondition;
    next: FallbackChannel;
  },
): Promise<boolean> {
  const { notificationId: id, next } = take;
  const history = routedReason(next);
  return database.sql.begin(async (tx) => {
    const taken: TakenFallback = {
      at: new Date().toISOString(),
      from: take.from,
      to: next.channel,
      because: take.because,
    };
    const moved = await tx`
      update notification_fallbacks set next_step = next_step + 1, watching = ${next.channel}, confirm_by = null,
        taken = taken || ${tx.json([taken] as never)}::jsonb,
        done_at = case when next_step + 1 >= jsonb_array_length(steps) then now() end
      where notification_id = ${id} and next_step = ${take.step} and done_at is null
      returning notification_id`;
    if (moved.length === 0) return false;
    // The timer before the channel: a notification's own rows before its channel rows (lock-order.ts).
    if (next.status === "deferred" && next.nextAttemptAt !== null) {
      await tx`
        insert into deferred_notifications (notification_id, user_id, due_at)
        values (${id}, ${take.userId}, ${next.nextAttemptAt})
        on conflict (notification_id) do update set due_at = least(deferred_notifications.due_at, excluded.due_at)`;
    }
    await tx`
      insert into notification_channels (notification_id, channel, status, reason, next_attempt_at, routed_status, routed_reason,
        user_id)
      values (${id}, ${next.channel}, ${next.status}, ${next.reason}, ${next.nextAttemptAt}, ${next.status}, ${history},
        ${take.userId})
      on conflict do nothing`;
    // An outcome other than queued (suppressed, expired, deferred) shows in its timeline at once.
    if (next.status !== "pending") {
      await tx`
        insert into channel_status_events (notification_id, channel, status, reason, attempt, user_id)
        values (${id}, ${next.channel}, ${next.status}, ${history}, 0, ${take.userId})`;
    }
    return true;
  });
}

/** What routing a notification's fallback channel reads of it. */
export interface FallbackRoutable {
  notification_id: string;
  client_id: string;
  user_id: string;
  category: string;
  template_id: string;
  template_version: number | null;
  priority: Priority;
  data: Record<string, unknown>;
  deliver_by: string | null;
  /** W3C traceparent of the ingest request (notifications.trace_parent), when it was traced. */
  trace_parent: string | null;
}

export async function readFallbackRoutable(database: Database, id: string): Promise<FallbackRoutable | null> {
  const [row] = await database.sql<FallbackRoutable[]>`
    select id as notification_id, client_id, user_id, category, template_id, template_version, priority, data,
      to_char(deliver_by at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as deliver_by, trace_parent
    from notifications where id = ${id}`;
  return row ?? null;
}
