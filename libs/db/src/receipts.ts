import { type ChannelStatus, statusesMovableTo } from "@notify/core";
import type { TransactionSql } from "postgres";
import type { Sql } from "./index.js";

/**
 * One provider event, mapped to what it means for a channel: `status` is the channel status it
 * moves to, or null for events that settle nothing (sent, opened, deferred and the like; kept
 * for the record only). A `payload` carrying `notification_id` and `channel` (SendGrid's
 * custom_args; Plivo's report URL when its V3 signature covers it) also finds a channel whose
 * send was never recorded: a worker that died after the provider accepted leaves no provider id.
 */
export interface Receipt {
  provider: string;
  /** The provider's id of this event: the dedup key (SendGrid retries posts for 24 h). */
  eventId: string;
  /** The provider's id of the message, as the worker recorded it on the channel. */
  providerId: string;
  status: ChannelStatus | null;
  reason: string | null;
  payload: unknown;
}

export interface RecordOutcome {
  /** New events stored. */
  stored: number;
  /** Events seen before: nothing done. */
  duplicates: number;
  /** New events whose send is not recorded yet: kept for the sweep. */
  pending: number;
}

// Stored in provider_receipts.status for events that move no channel.
const NO_STATUS = "none";

interface StoredReceipt {
  provider: string;
  event_id: string;
  provider_id: string;
  status: string;
  reason: string | null;
}

/**
 * Applies one stored receipt to its channel if the send is recorded. The status moves forward
 * only (libs/core status.ts), so a late or repeated receipt never regresses the channel; the
 * receipt counts as applied once its channel exists, whether or not it moved it.
 */
async function apply(tx: TransactionSql, receipt: StoredReceipt): Promise<boolean> {
  const [channel] = await tx<{ notification_id: string }[]>`
    select notification_id from notification_channels
    where provider = ${receipt.provider} and provider_id = ${receipt.provider_id} limit 1`;
  if (channel === undefined) {
    // Only a channel without any provider id: one send per channel, never another send's id.
    const [bound] = await tx<{ notification_id: string }[]>`
      update notification_channels c set provider = ${receipt.provider}, provider_id = ${receipt.provider_id}
      from provider_receipts r
      where r.provider = ${receipt.provider} and r.event_id = ${receipt.event_id}
        and c.notification_id = r.payload->>'notification_id' and c.channel = r.payload->>'channel'
        and c.provider_id is null
      returning c.notification_id`;
    if (bound === undefined) return false;
  }
  if (receipt.status !== NO_STATUS) {
    const to = receipt.status as ChannelStatus;
    await tx`
      with moved as (
        update notification_channels set status = ${to}, reason = ${receipt.reason}, updated_at = now()
        where provider = ${receipt.provider} and provider_id = ${receipt.provider_id}
          and status = any(${statusesMovableTo(to)})
        returning notification_id, channel, status, reason, attempts, provider_id
      )
      insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id)
      select notification_id, channel, status, reason, attempts, provider_id from moved`;
  }
  await tx`
    update provider_receipts set applied_at = now()
    where provider = ${receipt.provider} and event_id = ${receipt.event_id}`;
  return true;
}

/** Stores each new receipt (once per event id) and applies it when its send is recorded. */
export async function recordReceipts(sql: Sql, receipts: Receipt[]): Promise<RecordOutcome> {
  const outcome: RecordOutcome = { stored: 0, duplicates: 0, pending: 0 };
  if (receipts.length === 0) return outcome;
  await sql.begin(async (tx) => {
    for (const r of receipts) {
      const [row] = await tx<StoredReceipt[]>`
        insert into provider_receipts (provider, event_id, provider_id, status, reason, payload)
        values (${r.provider}, ${r.eventId}, ${r.providerId}, ${r.status ?? NO_STATUS}, ${r.reason}, ${tx.json(r.payload as never)})
        on conflict do nothing
        returning provider, event_id, provider_id, status, reason`;
      if (row === undefined) {
        outcome.duplicates += 1;
        continue;
      }
      outcome.stored += 1;
      if (!(await apply(tx, row))) outcome.pending += 1;
    }
  });
  return outcome;
}

/**
 * Applies receipts that arrived before their send was recorded (a provider can report faster
 * than a worker writes, and a worker that died after the send writes nothing until its item is
 * redelivered). Oldest first; SKIP LOCKED lets several receipts processes share the work.
 */
export async function applyPendingReceipts(sql: Sql, limit = 500): Promise<number> {
  return sql.begin(async (tx) => {
    const due = await tx<StoredReceipt[]>`
      select r.provider, r.event_id, r.provider_id, r.status, r.reason from provider_receipts r
      where r.applied_at is null and (
        exists (select 1 from notification_channels c where c.provider = r.provider and c.provider_id = r.provider_id)
        or exists (select 1 from notification_channels c where c.notification_id = r.payload->>'notification_id'
          and c.channel = r.payload->>'channel' and c.provider_id is null))
      order by r.received_at, r.event_id
      limit ${limit}
      for update of r skip locked`;
    for (const receipt of due) await apply(tx, receipt);
    return due.length;
  });
}

/**
 * Deletes receipts that never matched a send (never applied) and arrived more than
 * `olderThanHours` ago, at most `limit` per call (oldest first, SKIP LOCKED so a concurrent
 * sweep applying one is never blocked and never loses it). Answers how many were deleted.
 * Applied receipts stay: they are the dedup record of what moved a channel.
 */
export async function purgeUnmatchedReceipts(
  sql: Sql,
  options: { olderThanHours: number; limit?: number },
): Promise<number> {
  const rows = await sql`
    delete from provider_receipts r
    using (
      select provider, event_id from provider_receipts
      where applied_at is null and received_at < now() - make_interval(hours => ${options.olderThanHours})
      order by received_at
      limit ${options.limit ?? 1000}
      for update skip locked
    ) due
    where r.provider = due.provider and r.event_id = due.event_id and r.applied_at is null
    returning r.event_id`;
  return rows.length;
}
