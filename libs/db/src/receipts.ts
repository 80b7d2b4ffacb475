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

/** A receipt this call applied, with the channel it applied to and that notification's traceparent. */
export interface AppliedReceipt {
  provider: string;
  eventId: string;
  providerId: string;
  status: ChannelStatus | null;
  notificationId: string;
  channel: string;
  /** notifications.trace_parent: the ingest request's span, when it was traced. */
  traceParent: string | null;
}

export interface RecordOptions {
  /**
   * Told the receipts this call applied, with their notification's stored traceparent (one more
   * read, made only when this is given: tracing on), so each gets a span in its notification's trace.
   */
  onApplied?(applied: AppliedReceipt[]): void;
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

/** One receipt as the set-based statements read it (jsonb_to_recordset). */
interface BatchRow {
  provider: string;
  event_id: string;
  provider_id: string;
  status: string;
  reason: string | null;
  payload: unknown;
  /** Which statement applies it: the n-th status-moving event of its message in the batch. */
  round: number;
  /** The channel statuses its status may move from (empty for events that move none). */
  movable: string[];
}

const keyOf = (provider: string, id: string): string => `${provider}\u0000${id}`;

const batchColumns = `provider text, event_id text, provider_id text, status text, reason text, payload jsonb,
  round int, movable text[]`;

/**
 * Stores each new receipt (once per event id) and applies it when its send is recorded: a
 * batch of any size costs one statement, plus one per further status-moving event of one
 * message in the batch (a delivery and its bounce in one post keep their order), and, only for
 * receipts whose send is not recorded under their provider id, one transaction binding them by
 * the notification id in their payload.
 *
 * A receipt is stored applied when its channel exists, in the statement that moves the
 * channel, so the two never disagree. A receipt of a later round is stored unapplied and
 * marked in its own statement: if that statement fails, the receipt is still there unapplied
 * for the pending sweep, never applied without its move.
 */
export async function recordReceipts(sql: Sql, receipts: Receipt[], options?: RecordOptions): Promise<RecordOutcome> {
  const outcome: RecordOutcome = { stored: 0, duplicates: 0, pending: 0 };
  const seen = new Set<string>();
  const moves = new Map<string, number>();
  const rows: BatchRow[] = [];
  for (const r of receipts) {
    const key = keyOf(r.provider, r.eventId);
    if (seen.has(key)) {
      outcome.duplicates += 1;
      continue;
    }
    seen.add(key);
    let round = 1;
    if (r.status !== null) {
      const message = keyOf(r.provider, r.providerId);
      round = (moves.get(message) ?? 0) + 1;
      moves.set(message, round);
    }
    rows.push({
      provider: r.provider,
      event_id: r.eventId,
      provider_id: r.providerId,
      status: r.status ?? NO_STATUS,
      reason: r.reason,
      payload: r.payload,
      round,
      movable: r.status === null ? [] : statusesMovableTo(r.status),
    });
  }
  if (rows.length === 0) return outcome;
  // One order for every batch (key entries, then channel rows locked in it): two posts holding
  // the same events (a provider's retry of a post still being stored) wait for each other
  // instead of deadlocking. A deadlock still met (a worker's write between them) costs a retry.
  const stored = await retryDeadlock(
    () => sql<{ event_id: string; provider: string; applied: boolean; round: number }[]>`
    with input as (
      select * from jsonb_to_recordset(${sql.json(rows as never)}) as r(${sql.unsafe(batchColumns)})
    ),
    stored as (
      insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, applied_at)
      select i.provider, i.event_id, i.provider_id, i.status, i.reason, i.payload,
        case when i.round = 1 and exists (
          select 1 from notification_channels c where c.provider = i.provider and c.provider_id = i.provider_id
        ) then now() end
      from input i order by i.provider, i.event_id
      on conflict do nothing
      returning provider, event_id, provider_id, applied_at is not null as applied
    ),
    moved as (
      update notification_channels c set status = i.status, reason = i.reason, updated_at = now()
      from stored s join input i on i.provider = s.provider and i.event_id = s.event_id
      where s.applied and i.status <> ${NO_STATUS}
        and c.provider = s.provider and c.provider_id = s.provider_id and c.status = any(i.movable)
      returning c.notification_id, c.channel, c.status, c.reason, c.attempts, c.provider_id
    ),
    history as (
      insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id)
      select notification_id, channel, status, reason, attempts, provider_id from moved
    )
    select s.provider, s.event_id, s.applied, i.round from stored s
    join input i on i.provider = s.provider and i.event_id = s.event_id`,
  );
  outcome.stored = stored.length;
  outcome.duplicates += rows.length - stored.length;

  const isNew = new Set(stored.map((s) => keyOf(s.provider, s.event_id)));
  const applied = new Set(stored.filter((s) => s.applied).map((s) => keyOf(s.provider, s.event_id)));
  const later = rows.filter((r) => r.round > 1 && isNew.has(keyOf(r.provider, r.event_id)));
  const lastRound = Math.max(1, ...later.map((r) => r.round));
  for (let round = 2; round <= lastRound; round++) {
    const marked = await retryDeadlock(
      () => sql<{ provider: string; event_id: string }[]>`
      with input as (
        select * from jsonb_to_recordset(${sql.json(later.filter((r) => r.round === round) as never)})
          as r(${sql.unsafe(batchColumns)})
      ),
      marked as (
        update provider_receipts r set applied_at = now()
        from input i
        where r.provider = i.provider and r.event_id = i.event_id and r.applied_at is null
          and exists (select 1 from notification_channels c where c.provider = i.provider and c.provider_id = i.provider_id)
        returning r.provider, r.event_id, r.provider_id
      ),
      moved as (
        update notification_channels c set status = i.status, reason = i.reason, updated_at = now()
        from marked m join input i on i.provider = m.provider and i.event_id = m.event_id
        where c.provider = m.provider and c.provider_id = m.provider_id and c.status = any(i.movable)
        returning c.notification_id, c.channel, c.status, c.reason, c.attempts, c.provider_id
      ),
      history as (
        insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id)
        select notification_id, channel, status, reason, attempts, provider_id from moved
      )
      select provider, event_id from marked`,
    );
    for (const m of marked) applied.add(keyOf(m.provider, m.event_id));
  }

  // Sends not recorded under their provider id (a worker that died after the provider took
  // them): bound by the payload's notification id, in batch order.
  const unbound = rows.filter(
    (r) => isNew.has(keyOf(r.provider, r.event_id)) && !applied.has(keyOf(r.provider, r.event_id)),
  );
  if (unbound.some((r) => hasChannelRef(r.payload))) {
    await retryDeadlock(() =>
      sql.begin(async (tx) => {
        for (const r of unbound) {
          if (await apply(tx, r)) applied.add(keyOf(r.provider, r.event_id));
        }
      }),
    );
  }
  outcome.pending = unbound.filter((r) => !applied.has(keyOf(r.provider, r.event_id))).length;
  if (options?.onApplied !== undefined && applied.size > 0) {
    // Best effort: the receipts are committed, and a failed read for their traces must not make
    // the webhook answer 5xx (the provider would post the whole batch again).
    const traced = await appliedWithTraces(
      sql,
      rows.filter((r) => applied.has(keyOf(r.provider, r.event_id))),
    ).catch(() => null);
    if (traced !== null) options.onApplied(traced);
  }
  return outcome;
}

/** The channels (and their notification's traceparent) of receipts just applied. */
async function appliedWithTraces(sql: Sql, rows: BatchRow[]): Promise<AppliedReceipt[]> {
  const found = await sql<
    { provider: string; provider_id: string; notification_id: string; channel: string; trace_parent: string | null }[]
  >`
    select c.provider, c.provider_id, c.notification_id, c.channel, n.trace_parent
    from unnest(${rows.map((r) => r.provider)}::text[], ${rows.map((r) => r.provider_id)}::text[]) as k(provider, provider_id)
    join notification_channels c on c.provider = k.provider and c.provider_id = k.provider_id
    join notifications n on n.id = c.notification_id`;
  const byMessage = new Map(found.map((f) => [keyOf(f.provider, f.provider_id), f]));
  return rows.flatMap((r) => {
    const f = byMessage.get(keyOf(r.provider, r.provider_id));
    return f === undefined
      ? []
      : [
          {
            provider: r.provider,
            eventId: r.event_id,
            providerId: r.provider_id,
            status: r.status === NO_STATUS ? null : (r.status as ChannelStatus),
            notificationId: f.notification_id,
            channel: f.channel,
            traceParent: f.trace_parent,
          },
        ];
  });
}

/** Runs a statement (or transaction) again when Postgres broke a deadlock by failing it: it had no effect. */
async function retryDeadlock<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if ((error as { code?: string }).code !== "40P01" || attempt >= 3) throw error;
    }
  }
}

const hasChannelRef = (payload: unknown): boolean => {
  const p = payload as { notification_id?: unknown; channel?: unknown } | null;
  return typeof p?.notification_id === "string" && typeof p.channel === "string";
};

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
