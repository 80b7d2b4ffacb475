import { type ChannelStatus, statusesMovableTo, type WorkItem } from "@notify/core";
import type { Sql } from "@notify/db";

/** Statuses a worker may still send from; anything else is settled (or being replayed). */
export const SENDABLE: readonly ChannelStatus[] = ["pending", "deferred", "retrying", "parked"];

export interface ChannelRow {
  status: ChannelStatus;
  attempts: number;
  attempts_before_replay: number;
}

export async function loadChannel(sql: Sql, item: WorkItem): Promise<ChannelRow | undefined> {
  const [row] = await sql<ChannelRow[]>`
    select status, attempts, attempts_before_replay from notification_channels
    where notification_id = ${item.notification_id} and channel = ${item.channel}`;
  return row;
}

/** One provider attempt and what came of it: the history a dead letter carries. */
export interface Attempt {
  attempt: number;
  outcome: string;
  providerId: string | null;
  error: string | null;
}

export interface StatusFields {
  reason?: string | null;
  provider?: string;
  providerId?: string | null;
  attempts?: number;
  /** When a retrying or parked channel is looked at again. */
  nextAttemptAt?: Date | null;
  /** The attempt that led here, recorded in the same statement (whether or not the move happens). */
  attempt?: Attempt;
}

/**
 * Moves a channel forward only (invariant 3) and logs the transition with its time and reason
 * in `channel_status_events`, in one statement: a refused move logs nothing. Answers whether
 * the move happened.
 */
export async function moveStatus(sql: Sql, item: WorkItem, to: ChannelStatus, fields: StatusFields): Promise<boolean> {
  const a = fields.attempt;
  const rows = await sql`
    with tried as (
      insert into delivery_attempts (notification_id, channel, attempt, outcome, provider_id, error)
      select ${item.notification_id}, ${item.channel}, ${a?.attempt ?? null}::int, ${a?.outcome ?? null}, ${a?.providerId ?? null}, ${a?.error ?? null}
      where ${a !== undefined}
      on conflict do nothing
    ), moved as (
      update notification_channels set
        status = ${to},
        reason = ${fields.reason ?? null},
        provider = coalesce(${fields.providerId ? (fields.provider ?? null) : null}, provider),
        provider_id = coalesce(${fields.providerId ?? null}, provider_id),
        attempts = coalesce(${fields.attempts ?? null}, attempts),
        next_attempt_at = ${fields.nextAttemptAt ?? null},
        updated_at = now()
      where notification_id = ${item.notification_id} and channel = ${item.channel}
        and status = any(${statusesMovableTo(to)})
      returning notification_id, channel, status, reason, attempts, provider_id, updated_at
    )
    insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at)
    select notification_id, channel, status, reason, attempts, provider_id, updated_at from moved`;
  return rows.count > 0;
}

export async function recordAttempt(sql: Sql, item: WorkItem, a: Attempt): Promise<void> {
  await sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome, provider_id, error)
    values (${item.notification_id}, ${item.channel}, ${a.attempt}, ${a.outcome}, ${a.providerId}, ${a.error})
    on conflict do nothing`;
}
