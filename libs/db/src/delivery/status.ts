import { type ChannelStatus, statusesMovableTo } from "@notify/core";
import { byKey, GATHER, perIterationOf, unnestColumns } from "../batch.js";
import { type ChannelRef, refKey } from "../channel-ref.js";
import { lockChannelKeys } from "../lock-order.js";
import { withinIdsLocking } from "../log-keys.js";
import type { Sql } from "../pool.js";

// A channel's status moves and provider attempts, as its worker writes them.

/** One provider attempt and what came of it: the history a dead letter carries. */
export interface Attempt {
  attempt: number;
  outcome: string;
  /** The provider called; null when none was (nothing sent, or a reconciliation). */
  provider?: string | null;
  providerId: string | null;
  error: string | null;
}

export interface StatusFields {
  reason?: string | null;
  /**
   * What the history row says beside the reason (`reason: detail`), e.g. the entry of the
   * suppression list that suppressed the channel; the channel's own reason stays `reason`.
   */
  detail?: string | null;
  provider?: string;
  providerId?: string | null;
  attempts?: number;
  /** When a retrying or parked channel is looked at again. */
  nextAttemptAt?: Date | null;
  /** The attempt that led here, recorded in the same statement (whether or not the move happens). */
  attempt?: Attempt;
}

interface Move {
  ref: ChannelRef;
  to: ChannelStatus;
  fields: StatusFields;
}

/**
 * Moves the moves of one batch in one statement: each one's attempt line (when it has one),
 * its channel's new status where the channel's present status allows the move, and a history row
 * for each channel moved. Answers, per move, whether its channel moved.
 */
async function moveMany(sql: Sql, asked: readonly Move[]): Promise<boolean[]> {
  // In key order: the attempt lines go in in this order, so two batches over the same channels
  // insert them alike (the channel rows are locked in key order by the statement itself).
  const moves = [...asked].sort(byKey((m) => refKey(m.ref)));
  const column = <T>(pick: (move: Move) => T) => moves.map(pick);
  // The batch's range of ids, in every lookup of the log (log-keys.ts), as a statement that locks
  // its rows in a subquery may have it (withinIdsLocking).
  const ids = moves.map((m) => m.ref.notification_id);
  const within = (key: string) => withinIdsLocking(sql, key, ids);
  const input = unnestColumns(sql, "i", {
    notification_id: ["text", column((m) => m.ref.notification_id)],
    channel: ["text", column((m) => m.ref.channel)],
    user_id: ["text", column((m) => m.ref.user_id ?? null)],
    status: ["text", column((m) => m.to)],
    movable: ["text", column((m) => statusesMovableTo(m.to).join(","))],
    reason: ["text", column((m) => m.fields.reason ?? null)],
    history: [
      "text",
      column((m) => (m.fields.reason && m.fields.detail ? `${m.fields.reason}: ${m.fields.detail}` : null)),
    ],
    provider: ["text", column((m) => m.fields.provider ?? null)],
    provider_id: ["text", column((m) => m.fields.providerId ?? null)],
    attempts: ["int", column((m) => m.fields.attempts ?? null)],
    next_attempt_at: ["timestamptz", column((m) => m.fields.nextAttemptAt?.toISOString() ?? null)],
    tried_attempt: ["int", column((m) => m.fields.attempt?.attempt ?? null)],
    tried_outcome: ["text", column((m) => m.fields.attempt?.outcome ?? null)],
    tried_provider: ["text", column((m) => m.fields.attempt?.provider ?? null)],
    tried_provider_id: ["text", column((m) => m.fields.attempt?.providerId ?? null)],
    tried_error: ["text", column((m) => m.fields.attempt?.error ?? null)],
  });
  const rows = await sql<ChannelRef[]>`
    with input as (
      select * from ${input}
    ), tried as (
      -- Each attempt line carries its channel's user: the caller's, or else the channel row's,
      -- looked up by key only then (a CASE evaluates the subquery of the branch it takes).
      insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, error, user_id)
      select i.notification_id, i.channel, i.tried_attempt, i.tried_outcome, i.tried_provider, i.tried_provider_id,
        i.tried_error,
        case when i.user_id is not null then i.user_id else (
          select c.user_id from notification_channels c
          where c.notification_id = i.notification_id and c.channel = i.channel and ${within("c.notification_id")}) end
      from input i
      where i.tried_attempt is not null
      on conflict do nothing
    ), moved as (
      update notification_channels c set
        status = i.status,
        reason = i.reason,
        provider = coalesce(i.provider, c.provider),
        provider_id = coalesce(i.provider_id, c.provider_id),
        attempts = coalesce(i.attempts, c.attempts),
        next_attempt_at = i.next_attempt_at,
        updated_at = now()
      -- Each channel by its key, never by the batch's range of ids alone (a batch of two
      -- notifications hours apart spans every channel row of those hours): the range only prunes.
      from (${lockChannelKeys(
        sql,
        sql`select * from input`,
        sql`c.status = any(string_to_array(k.movable, ',')) and ${withinIdsLocking(sql, "c.notification_id", ids, "locked")}`,
      )}) i
      where c.notification_id = i.notification_id and c.channel = i.channel
        and c.status = any(string_to_array(i.movable, ','))
        -- The batch's ids as a subquery, not a parameter: a custom plan would read a parameter's
        -- array and cost the statement so much lower than the generic plan that PostgreSQL would
        -- plan it anew, over every partition, on every run.
        and c.notification_id = any(array(select notification_id from input)) and ${within("c.notification_id")}
      returning c.notification_id, c.channel, c.status, coalesce(i.history, c.reason) as reason, c.attempts,
        c.provider_id, c.updated_at, c.user_id
    ), history as (
      -- Each history row carries the user of the channel row it records the move of.
      insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at, user_id)
      select notification_id, channel, status, reason, attempts, provider_id, updated_at, user_id from moved
    )
    select notification_id, channel from moved`;
  const moved = new Set(rows.map(refKey));
  return asked.map((m) => moved.has(refKey(m.ref)));
}

const moveBatched = perIterationOf(moveMany, { writes: (m) => refKey(m.ref), ...GATHER });

/**
 * Moves a channel forward only (libs/core channel-status.ts) and logs the transition with its
 * time and reason in `channel_status_events`, in one statement: a refused move logs nothing.
 * Answers whether the move happened. The moves of one event-loop iteration on one pool go in one
 * statement (two moves of one channel still one after the other).
 */
export const moveStatus = (sql: Sql, ref: ChannelRef, to: ChannelStatus, fields: StatusFields): Promise<boolean> =>
  moveBatched(sql, { ref, to, fields });

export async function recordAttempt(sql: Sql, ref: ChannelRef, a: Attempt): Promise<void> {
  await sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, error, user_id)
    values (${ref.notification_id}, ${ref.channel}, ${a.attempt}, ${a.outcome}, ${a.provider ?? null}, ${a.providerId}, ${a.error},
      -- The channel's user: the caller's, or else its row's (looked up only then).
      coalesce(${ref.user_id ?? null}::text,
        (select c.user_id from notification_channels c where c.notification_id = ${ref.notification_id} and c.channel = ${ref.channel})))
    on conflict do nothing`;
}
