import { type ChannelStatus, statusesMovableTo } from "@notify/core";
import type { PendingQuery, Row, TransactionSql } from "postgres";
import { unnestColumns } from "../batch.js";
import { lockChannelKeys } from "../lock-order.js";
import { amongIdsOf, withinIds, withinIdsLocking } from "../log-keys.js";
import type { Sql } from "../pool.js";

type Fragment = PendingQuery<Row[]>;

/**
 * The `moved` and `history` steps of a receipts statement: each channel its `found` step names
 * (notification_id, channel, status, reason, movable, and what `where` reads of it as `k`) is
 * locked in key order (lockChannelKeys) and moves forward if, as it is once locked, it meets
 * `where` and its status is still movable; each move is logged in the channel's status history
 * with the channel row's user. With `ids`, every channel found is of one of those notifications:
 * its lock and the UPDATE are bounded by their range too, as a statement that locks rows in a
 * subquery may be (withinIdsLocking).
 */
const moveFoundChannels = (sql: Sql | TransactionSql, where: Fragment, ids?: readonly string[]) => sql`
  moved as (
    update notification_channels c set status = l.status, reason = l.reason, updated_at = now()
    from (${lockChannelKeys(
      sql,
      sql`select * from found`,
      ids === undefined ? where : sql`${where} and ${withinIdsLocking(sql, "c.notification_id", ids, "locked")}`,
    )}) l
    where c.notification_id = l.notification_id and c.channel = l.channel and c.status = any(l.movable)
      and ${amongIdsOf(sql, "c.notification_id", "found", "notification_id")}
      ${ids === undefined ? sql`` : sql`and ${withinIdsLocking(sql, "c.notification_id", ids)}`}
    returning c.notification_id, c.channel, c.status, c.reason, c.attempts, c.provider_id, c.user_id
  ),
  history as (
    insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, user_id)
    select notification_id, channel, status, reason, attempts, provider_id, user_id from moved
  )`;

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

/** One receipt as the set-based statements read it (jsonb_to_recordset). */
interface BatchRow {
  provider: string;
  event_id: string;
  provider_id: string;
  status: string;
  reason: string | null;
  payload: unknown;
  /**
   * The notification it names (namedIn), or, for a receipt read back from the table, the one it
   * was stored under: its partition of the log, and part of its key.
   */
  notification_id: string | null;
  /** Which statement applies it: the n-th status-moving event of its message in the batch. */
  round: number;
  /** The channel statuses its status may move from (empty for events that move none). */
  movable: string[];
}

/**
 * The notification a receipt's payload names (SendGrid's custom_args, Plivo's signed report URL:
 * the ids our providers send each message with), as SQL over the receipt row `alias`; null when
 * it names none. A send is looked for among that notification's channels alone, in its own
 * partition of the log (log-keys.ts): a provider id is the id of one message, sent for that
 * notification. A receipt that names none is looked for in every partition.
 */
const namedIn = (alias: string): string =>
  `(case when jsonb_typeof(${alias}.payload -> 'notification_id') = 'string' then ${alias}.payload ->> 'notification_id' end)`;

/** The notification a payload names, as namedIn says it. */
const namedBy = (payload: unknown): string | null => {
  const id = (payload as { notification_id?: unknown } | null)?.notification_id;
  return typeof id === "string" ? id : null;
};

/** Whether every receipt of `rows` names its notification. */
const allNamed = (rows: readonly { payload: unknown }[]): boolean =>
  rows.every((r) => typeof (r.payload as { notification_id?: unknown } | null)?.notification_id === "string");

/**
 * The notification each receipt of a statement names (`expr`, namedIn over its row), with what is
 * known of them before the statement runs: the ids named (`ids`), and whether every receipt names
 * one (`all`). A lookup by the named id is bounded by their range (withinIds, log-keys.ts), and
 * with `all` the lookup of a receipt that names none, which reads every partition, is left out.
 */
interface Named {
  expr: string;
  ids: readonly string[];
  all: boolean;
}

/** `rows`' notifications as named by `alias`'s payload (namedIn), for sendOf and sendLookup. */
const namedScope = (alias: string, rows: readonly { payload: unknown }[]): Named => {
  const ids = rows.flatMap((r) => {
    const id = namedBy(r.payload);
    return id === null ? [] : [id];
  });
  return { expr: namedIn(alias), ids, all: ids.length === rows.length };
};

/** `and column` within the named ids' range, when some are named. */
const withinNamed = (sql: Sql | TransactionSql, column: string, named: Named) =>
  named.ids.length === 0 ? sql`` : sql`and ${withinIds(sql, column, named.ids)}`;

/**
 * The channel a receipt `i` belongs to, found by its provider id: joined laterally, so that it is
 * an index lookup per receipt. As an EXISTS the planner, which takes a batch for a hundred rows
 * whatever its size, would rather hash the whole table once per statement: a sequential scan of
 * every channel for each post of one receipt, growing with the table. With `named` (namedIn),
 * among the channels of the notification the receipt names, when it names one.
 */
const sendOf = (sql: Sql | TransactionSql, named?: Named) =>
  named === undefined
    ? sql`select true as found from notification_channels c where c.provider = i.provider and c.provider_id = i.provider_id limit 1`
    : sql`
      select true as found from notification_channels c
      where ${sql.unsafe(named.expr)} is not null and c.notification_id = ${sql.unsafe(named.expr)}
        and c.provider = i.provider and c.provider_id = i.provider_id ${withinNamed(sql, "c.notification_id", named)}
      ${
        named.all
          ? sql``
          : sql`
      union all
      select true from notification_channels c
      where ${sql.unsafe(named.expr)} is null and c.provider = i.provider and c.provider_id = i.provider_id`
      }
      limit 1`;

/**
 * The channel (`f.notification_id`, `f.channel`) of each row of `outer` (which has `provider` and
 * `provider_id`), found laterally by its provider id. Joined by the provider id directly, a plan
 * made while the table was nearly empty (a prepared statement's generic plan on a fresh database)
 * may look the channel up by its provider alone and read every send of that provider per
 * receipt. A lateral subquery the planner may not merge into the join (`offset 0`) has only the
 * two columns of one index to look up by. With `named` as sendOf's.
 */
const sendLookup = (sql: Sql | TransactionSql, outer: string, named?: Named) => sql`
  cross join lateral (
    ${
      named === undefined
        ? sql``
        : sql`
    -- The notification the receipt names, looked up in its partition alone (see namedIn).
    select f.notification_id, f.channel from notification_channels f
    where ${sql.unsafe(named.expr)} is not null and f.notification_id = ${sql.unsafe(named.expr)}
      and f.provider = ${sql.unsafe(outer)}.provider and f.provider_id = ${sql.unsafe(outer)}.provider_id
      ${withinNamed(sql, "f.notification_id", named)}
    ${named.all ? sql`` : sql`union all`}`
    }
    ${
      named?.all
        ? sql``
        : sql`
    select f.notification_id, f.channel from notification_channels f
    where f.provider = ${sql.unsafe(outer)}.provider and f.provider_id = ${sql.unsafe(outer)}.provider_id
      ${named === undefined ? sql`` : sql`and ${sql.unsafe(named.expr)} is null`}`
    }
    -- Kept a subquery of its own (not merged into the join), so both columns are its index condition.
    offset 0
  ) f`;

/**
 * The channel row `c` of each row of `outer`, found by sendLookup and then joined by its key:
 * for a read. A statement that locks the rows it finds goes by lockChannelKeys (lock-order.ts).
 */
const channelOf = (sql: Sql | TransactionSql, outer: string, named?: Named) => sql`
  ${sendLookup(sql, outer, named)}
  join notification_channels c on c.notification_id = f.notification_id and c.channel = f.channel`;

/**
 * Of a channel row `c` locked for the key row `k` (lockChannelKeys), whether it still holds the
 * send `k` found it by and a status `k` may move: checked again against the row's newest version
 * once its lock is granted (another send's id may have replaced it meanwhile). As IS NOT
 * DISTINCT FROM, which no index answers, so the row is still found by its key.
 */
const stillMovable = (sql: Sql | TransactionSql) =>
  sql`(c.provider, c.provider_id) is not distinct from (k.provider, k.provider_id) and c.status = any(k.movable)`;

/**
 * Numbers receipts by round as they come: the n-th status-moving event of one message is in round
 * n, an event that moves nothing in round 1.
 */
function roundCounter(): (provider: string, providerId: string, movesStatus: boolean) => number {
  const moves = new Map<string, number>();
  return (provider, providerId, movesStatus) => {
    if (!movesStatus) return 1;
    const message = keyOf(provider, providerId);
    const round = (moves.get(message) ?? 0) + 1;
    moves.set(message, round);
    return round;
  };
}

const keyOf = (provider: string, id: string): string => `${provider}\u0000${id}`;

const batchColumns = `provider text, event_id text, provider_id text, status text, reason text, payload jsonb,
  notification_id text, round int, movable text[]`;

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
  const roundOf = roundCounter();
  const rows: BatchRow[] = [];
  for (const r of receipts) {
    const key = keyOf(r.provider, r.eventId);
    if (seen.has(key)) {
      outcome.duplicates += 1;
      continue;
    }
    seen.add(key);
    rows.push({
      provider: r.provider,
      event_id: r.eventId,
      provider_id: r.providerId,
      status: r.status ?? NO_STATUS,
      reason: r.reason,
      payload: r.payload,
      notification_id: namedBy(r.payload),
      round: roundOf(r.provider, r.providerId, r.status !== null),
      movable: r.status === null ? [] : statusesMovableTo(r.status),
    });
  }
  if (rows.length === 0) return outcome;
  const named = namedScope("i", rows);
  // The lock order of every writer (lock-order.ts): the events' key entries in key order, so two
  // posts holding the same events (a provider's retry of a post still being stored) wait for
  // each other, then the channel rows, in key order, each before it is moved. A deadlock still
  // met (with a delete of the notification by retention) costs a retry.
  const stored = await retryDeadlock(
    () => sql<{ event_id: string; provider: string; applied: boolean; round: number }[]>`
    with input as (
      select * from jsonb_to_recordset(${sql.json(rows as never)}) as r(${sql.unsafe(batchColumns)})
    ),
    stored as (
      insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, notification_id, applied_at)
      select i.provider, i.event_id, i.provider_id, i.status, i.reason, i.payload, i.notification_id,
        case when i.round = 1 and k.found then now() end
      from input i
      left join lateral (${sendOf(sql, named)}) k on true
      order by i.notification_id, i.event_id, i.provider
      on conflict do nothing
      returning provider, event_id, provider_id, applied_at is not null as applied
    ),
    found as (
      select f.notification_id, f.channel, i.status, i.reason, i.movable, s.provider, s.provider_id
      from stored s join input i on i.provider = s.provider and i.event_id = s.event_id
      ${sendLookup(sql, "s", named)}
      where s.applied and i.status <> ${NO_STATUS}
    ),
    ${moveFoundChannels(sql, stillMovable(sql), named.all ? named.ids : undefined)}
    select s.provider, s.event_id, s.applied, i.round from stored s
    join input i on i.provider = s.provider and i.event_id = s.event_id`,
  );
  outcome.stored = stored.length;
  outcome.duplicates += rows.length - stored.length;

  const isNew = new Set(stored.map((s) => keyOf(s.provider, s.event_id)));
  const applied = new Set(stored.filter((s) => s.applied).map((s) => keyOf(s.provider, s.event_id)));
  const later = rows.filter((r) => r.round > 1 && isNew.has(keyOf(r.provider, r.event_id)));
  for (const key of await applyInRounds(sql, later, true)) applied.add(key);

  // Sends not recorded under their provider id: a provider that reports faster than the worker
  // records, or a worker that died after the provider took the send.
  const unbound = rows.filter(
    (r) => isNew.has(keyOf(r.provider, r.event_id)) && !applied.has(keyOf(r.provider, r.event_id)),
  );
  if (unbound.some((r) => hasChannelRef(r.payload))) {
    for (const key of await bindAndApply(sql, unbound, true)) applied.add(key);
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
  const named = rows.map((r) => {
    const id = (r.payload as { notification_id?: unknown } | null)?.notification_id;
    return typeof id === "string" ? id : null;
  });
  const keys = unnestColumns(sql, "k", {
    provider: ["text", rows.map((r) => r.provider)],
    provider_id: ["text", rows.map((r) => r.provider_id)],
    notification_id: ["text", named],
  });
  // When every receipt names its notification, the rows joined are within their range of ids,
  // which the log's partitions are pruned by (log-keys.ts).
  const within = allNamed(rows)
    ? sql`where ${withinIds(sql, "c.notification_id", named as string[])} and ${withinIds(sql, "n.id", named as string[])}`
    : sql``;
  const found = await sql<
    { provider: string; provider_id: string; notification_id: string; channel: string; trace_parent: string | null }[]
  >`
    select c.provider, c.provider_id, c.notification_id, c.channel, n.trace_parent
    from ${keys}
    ${channelOf(sql, "k", {
      expr: "k.notification_id",
      ids: named.filter((id): id is string => id !== null),
      all: allNamed(rows),
    })}
    -- The channel row's user (a row written before migration 0029 carries none until it is
    -- filled in: docs/capacity.md, "Sharded by user").
    join notifications n on n.id = c.notification_id and n.user_id = coalesce(c.user_id, n.user_id)
    ${within}`;
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

/**
 * The `marked` step of a round: marks applied each receipt of `input` whose send is recorded and
 * that is not applied yet. It is an insert whose every row conflicts with the receipt as stored
 * (by recordReceipts' first statement, or claimed by the pending sweep), so each receipt is found
 * by the conflict check's probe of the key index, a lookup no plan replaces. An update joined
 * with its input leaves how to find the rows to the planner, and a prepared statement's generic
 * plan, made while the table is nearly empty, reads the whole partial index of waiting receipts
 * (an entry for every receipt that ever waited, until a vacuum) or, with each key looked up
 * laterally first, hashes the whole table. A receipt the check finds applied (a sweep applied it
 * meanwhile) is left as it is and not answered. A receipt no longer stored (the purge deletes
 * only unapplied receipts hours old, and skips those a sweep holds) is stored again, applied,
 * with an empty payload.
 */
const markStored = (sql: Sql | TransactionSql) => sql`
  insert into provider_receipts as r (provider, event_id, provider_id, status, reason, payload, notification_id, applied_at)
  select i.provider, i.event_id, i.provider_id, i.status, i.reason, '{}', i.notification_id, now()
  from input i cross join lateral (${sendOf(sql)}) k
  -- In key order, as the receipts step 1 stores them (lock-order.ts).
  order by i.notification_id, i.event_id, i.provider
  on conflict (notification_id, event_id, provider) do update set applied_at = now() where r.applied_at is null
  returning r.provider, r.event_id, r.provider_id`;

/**
 * Applies stored, unapplied receipts whose channel is recorded under their provider id, one
 * statement per round (the n-th status-moving event of one message is in round n, so a delivery
 * and its bounce keep their order). Answers the keys of the receipts it applied.
 */
async function applyInRounds(sql: Sql | TransactionSql, rows: BatchRow[], retry: boolean): Promise<Set<string>> {
  const applied = new Set<string>();
  let lastRound = 0;
  for (const r of rows) lastRound = Math.max(lastRound, r.round);
  for (let round = 1; round <= lastRound; round++) {
    const input = rows.filter((r) => r.round === round).map((r) => ({ ...r, payload: null }));
    if (input.length === 0) continue;
    const run = () =>
      sql<{ provider: string; event_id: string }[]>`
      with input as (
        select * from jsonb_to_recordset(${sql.json(input as never)}) as r(${sql.unsafe(batchColumns)})
      ),
      -- Each receipt found by its key, whatever the plan (markStored).
      marked as (
        ${markStored(sql)}
      ),
      found as (
        select f.notification_id, f.channel, i.status, i.reason, i.movable, m.provider, m.provider_id
        from marked m join input i on i.provider = m.provider and i.event_id = m.event_id
        ${sendLookup(sql, "m")}
      ),
      -- Every receipt is marked before any channel row is locked (lock-order.ts): the channels
      -- are found from the marked receipts, and all of them sorted before the first is locked.
      ${moveFoundChannels(sql, stillMovable(sql))}
      select provider, event_id from marked`;
    for (const m of retry ? await retryDeadlock(run) : await run()) applied.add(keyOf(m.provider, m.event_id));
  }
  return applied;
}

/**
 * Binds receipts whose send is not recorded under their provider id to the channel their payload
 * names, when that channel has no provider id yet (one send per channel, never another send's
 * id), then applies them: one statement to bind them all, one per round to apply. As applying
 * them one by one in order would: the first receipt of a message that names a channel binds it,
 * and the message's receipts before that one stay pending (the sweep takes them later). Answers
 * the keys of the receipts it applied.
 */
async function bindAndApply(sql: Sql | TransactionSql, rows: BatchRow[], retry: boolean): Promise<Set<string>> {
  // Who binds what, in order: one channel per message and one message per channel.
  const bindAt = new Map<string, number>();
  const taken = new Set<string>();
  const binds: { provider: string; provider_id: string; notification_id: string; channel: string }[] = [];
  rows.forEach((r, index) => {
    const message = keyOf(r.provider, r.provider_id);
    if (bindAt.has(message) || !hasChannelRef(r.payload)) return;
    const { notification_id, channel } = r.payload as { notification_id: string; channel: string };
    const target = keyOf(notification_id, channel);
    if (taken.has(target)) return;
    taken.add(target);
    bindAt.set(message, index);
    binds.push({ provider: r.provider, provider_id: r.provider_id, notification_id, channel });
  });
  const bind = () =>
    sql<{ provider: string; provider_id: string }[]>`
    with input as (
      select * from jsonb_to_recordset(${sql.json(binds as never)})
        as i(provider text, provider_id text, notification_id text, channel text)
    )
    update notification_channels c set provider = i.provider, provider_id = i.provider_id
    from (${lockChannelKeys(sql, sql`select notification_id, channel, provider, provider_id from input`, sql`c.provider_id is null`)}) i
    left join lateral (${sendOf(sql)}) k on true
    where c.notification_id = i.notification_id and c.channel = i.channel and c.provider_id is null and k.found is null
      and ${amongIdsOf(sql, "c.notification_id", "input", "notification_id")}
    returning i.provider, i.provider_id`;
  const bound = new Set(
    (binds.length === 0 ? [] : retry ? await retryDeadlock(bind) : await bind()).map((b) =>
      keyOf(b.provider, b.provider_id),
    ),
  );
  // What may apply now, its rounds counted again: of a message bound here, its receipts from the
  // binding one on; of any other, all (its send may have been recorded meanwhile).
  const roundOf = roundCounter();
  const eligible: BatchRow[] = [];
  rows.forEach((r, index) => {
    const message = keyOf(r.provider, r.provider_id);
    if (bound.has(message) && index < (bindAt.get(message) as number)) return;
    eligible.push({ ...r, round: roundOf(r.provider, r.provider_id, r.status !== NO_STATUS) });
  });
  return applyInRounds(sql, eligible, retry);
}

const hasChannelRef = (payload: unknown): boolean => {
  const p = payload as { notification_id?: unknown; channel?: unknown } | null;
  return typeof p?.notification_id === "string" && typeof p.channel === "string";
};

/**
 * Applies receipts that arrived before their send was recorded (a provider can report faster
 * than a worker writes, and a worker that died after the send writes nothing until its item is
 * redelivered). Oldest first; SKIP LOCKED lets several receipts processes share the work. With
 * `withinHours`, only receipts that came within that many hours: an older one never matched a
 * send and is no longer tried. It stays, unapplied, until its partition of the log is retired
 * with its notification's day (the ones that name no notification are purged: purge.ts).
 */
export async function applyPendingReceipts(sql: Sql, limit = 500, withinHours?: number): Promise<number> {
  return sql.begin(async (tx) => {
    const due = await tx<
      {
        provider: string;
        event_id: string;
        provider_id: string;
        status: string;
        reason: string | null;
        notification_id: string | null;
        channel: string | null;
        stored_under: string | null;
      }[]
    >`
      select r.provider, r.event_id, r.provider_id, r.status, r.reason,
        r.payload->>'notification_id' as notification_id, r.payload->>'channel' as channel,
        r.notification_id as stored_under
      from provider_receipts r
      -- Each channel looked up by its key per receipt (\`offset 0\`: a subquery the planner keeps
      -- as it is), never the whole table hashed: a plan made while the table was nearly empty
      -- would otherwise keep hashing it as it grows.
      where r.applied_at is null
        -- A bound of the waiting index's range (no window: a century).
        and r.received_at >= now() - make_interval(hours => ${withinHours ?? 1_000_000}::int)
        and (
        exists (select 1 from notification_channels c where c.provider = r.provider and c.provider_id = r.provider_id offset 0)
        or exists (select 1 from notification_channels c where c.notification_id = r.payload->>'notification_id'
          and c.channel = r.payload->>'channel' and c.provider_id is null offset 0))
      order by r.received_at, r.event_id
      limit ${limit}
      for update of r skip locked`;
    if (due.length === 0) return 0;
    // The channels it may bind or move, all locked in key order before it writes any: it writes
    // them in several statements, each of which would otherwise add its own rows in its own
    // order while holding the rows of the one before (lock-order.ts).
    const refs = due.filter((d) => d.notification_id !== null && d.channel !== null);
    await tx`
      with candidates as (
        select f.notification_id, f.channel
        from unnest(${due.map((d) => d.provider)}::text[], ${due.map((d) => d.provider_id)}::text[]) as k(provider, provider_id)
        ${sendLookup(tx, "k")}
        union
        select notification_id, channel
        from unnest(${refs.map((d) => d.notification_id) as string[]}::text[], ${refs.map((d) => d.channel) as string[]}::text[])
          as r(notification_id, channel)
      )
      ${lockChannelKeys(tx, tx`select notification_id, channel from candidates`, tx`true`)}`;
    // Their rounds are counted by bindAndApply, over those it may apply.
    const rows: BatchRow[] = due.map((d) => ({
      provider: d.provider,
      event_id: d.event_id,
      provider_id: d.provider_id,
      status: d.status,
      reason: d.reason,
      payload:
        d.notification_id !== null && d.channel !== null
          ? { notification_id: d.notification_id, channel: d.channel }
          : {},
      notification_id: d.stored_under,
      round: 1,
      movable: d.status === NO_STATUS ? [] : statusesMovableTo(d.status as ChannelStatus),
    }));
    return (await bindAndApply(tx, rows, false)).size;
  });
}
