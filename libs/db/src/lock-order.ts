import type { PendingQuery, Row, TransactionSql } from "postgres";
import type { Sql } from "./pool.js";

/*
 * The order in which writers lock a notification's rows, so that none of them waits for
 * another while holding what that one waits for (a deadlock: PostgreSQL cancels one of the
 * two statements). The workers' status moves, receipts, routing, the fallback steps, the
 * deferral release and the reconciler all follow it:
 *
 * 1. The rows that say what a writer is about, before any channel row: receipts (new ones
 *    inserted in (event_id, provider) order, pending ones claimed SKIP LOCKED, then marked
 *    applied), deferral timers (claimed SKIP LOCKED, or set by a fallback step), a fallback
 *    chain's row (one per transaction, by compare-and-set).
 * 2. Channel rows (notification_channels), in (notification_id, channel) order, each one a
 *    statement writes locked in that order before it is written (`lockChannels`): a statement
 *    never waits for a row while holding a later one. The order a plan meets rows
 *    in is the planner's: a hash join meets them in the table's physical order, which every
 *    update that moves a row to another page changes, so a statement that updated them
 *    straight from its input, however sorted, would lock them in an order of its own. A
 *    transaction that writes channel rows in several statements locks all of them in its first.
 *    A channel row a transaction inserts is seen by no other writer before the commit: only
 *    another insert of the same row waits for it.
 * 3. What is written after the channel rows and never held by a writer that then waits for one:
 *    attempt lines and history rows (no foreign keys: they lock nothing else), the daily cap's
 *    counters (a deferral release, which takes several users' slots, first takes their cap
 *    locks in one order: lockCapCounters).
 *
 * Retention takes a whole range of the log out at once (detaching its partitions, which waits
 * for every statement on the log's tables and holds the next ones for that moment); its
 * row-by-row path, for the few rows kept outside the ranges, deletes a notification's channel
 * rows, history and attempts before its row: a writer at a notification older than the
 * retention window may still meet it, and the deadlock cancels one of the two, which a retry
 * repeats.
 */

/**
 * `rows`, a select from `notification_channels c` (joined with whatever names the rows), in
 * (notification_id, channel) order with each channel row locked as an UPDATE locks it: a
 * statement's channel rows, all locked in one order, each before it is written. The FROM item
 * of the UPDATE that writes them, or a statement of its own, never a CTE (lockChannelKeys says
 * why). A row whose select condition no longer holds once its lock is granted (another writer
 * moved it meanwhile) is left out.
 */
export const lockChannels = (sql: Sql | TransactionSql, rows: PendingQuery<Row[]>): PendingQuery<Row[]> =>
  sql`${rows} order by c.notification_id, c.channel for no key update of c`;

/**
 * As lockChannels, for channels named by their key: `keys` is a select answering at least
 * `notification_id` and `channel` (and whatever else the statement carries on, answered as
 * `k.*`). Its rows are sorted by key, and each has its channel row looked up by that key (an
 * index probe in the one partition of the log that holds it, whatever plan the statement was
 * given: a lateral subquery kept as it is, `offset 0`) and locked as an UPDATE locks it, in that
 * order. Joined with the table instead, a prepared statement's generic plan, made while the
 * log's partitions were nearly empty, hashes every partition once per row. `where`, a condition
 * on the channel row `c` and the key row `k`, is checked again against the row's newest version
 * once its lock is granted: a row that no longer meets it is left out.
 *
 * The FROM item of the UPDATE that writes the rows (`update notification_channels c ... from
 * (lockChannelKeys(...)) i`, the UPDATE itself a CTE or not), or a statement of its own; never a
 * CTE of its own. PostgreSQL 18 (18.4 at least, the embedded server's version; 15 to 17 do not)
 * mishandles a row lock taken in a CTE of a partitioned table once the row must be checked again
 * (another transaction updated it while this one waited): the server process crashes, taking
 * every connection down with it, or the statement answers none of its rows. In the UPDATE's own
 * FROM the rows are still locked in key order, each before the UPDATE writes it. The lookup that
 * locks, and the UPDATE it feeds, are bounded with withinIdsLocking (log-keys.ts), `where`
 * included: on PostgreSQL 18 either, pruned as the executor starts, finds nothing once a row is
 * rechecked. The statement's other lookups may be pruned so (withinIds: the receipts' lookups by
 * the notification a receipt names), as libs/db/test/row-recheck.test.ts holds them to.
 *
 * A FOR KEY SHARE lock (routing's check that its notification is still there) is rechecked only
 * when the row's key changes, which a notification's never does (it is deleted, and a deleted
 * row is skipped without a recheck): it may stay in a CTE.
 */
export const lockChannelKeys = (
  sql: Sql | TransactionSql,
  keys: PendingQuery<Row[]>,
  where: PendingQuery<Row[]>,
): PendingQuery<Row[]> => sql`
  select k.* from (select * from (${keys}) k order by k.notification_id, k.channel offset 0) k
  cross join lateral (
    select 1 from notification_channels c
    where c.notification_id = k.notification_id and c.channel = k.channel and ${where}
    offset 0
    for no key update of c
  ) c
  -- Kept whole (not merged into the UPDATE it feeds, whose plan would then meet the rows, and
  -- lock them, in an order of its own).
  offset 0`;
