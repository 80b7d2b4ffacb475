import type { PendingQuery, Row, TransactionSql } from "postgres";
import { eachId } from "../log-keys.js";
import type { Database, Sql } from "../pool.js";

/** A notification's throttle as a routing takes it: its key, limit and period, at the routing clock's `at`. */
export interface ThrottleLimit {
  key: string;
  limit: number;
  perMs: number;
  /** The routing clock's now: the slot's time, and the end of the window it is counted in. */
  at: Date;
}

/** One slot to take: the throttle and the notification that takes it. */
export interface ThrottleTake extends ThrottleLimit {
  clientId: string;
  userId: string;
  notificationId: string;
}

/** What taking a slot did. */
export interface ThrottleTaken {
  /** Within the limit: the notification holds a slot of its key. */
  granted: boolean;
  /** This call inserted the slot (false: it was held already, or over the limit). */
  fresh: boolean;
}

/**
 * The advisory lock class of the throttles (the second key is the hash of client, user and
 * key; a collision only makes two keys wait for each other). Other classes: 7266001
 * migrations, 7266002 broadcast counts, 7266003 role setup, 7266005 inbox stores, 7266006 daily caps.
 */
const THROTTLE_LOCK = 7266004;

/** The lock's second key, from SQL values of client, user and throttle key (json_build_array: unambiguous). */
type Value = string | PendingQuery<Row[]>;
const lockKey = (sql: Sql | TransactionSql, clientId: Value, userId: Value, key: Value): PendingQuery<Row[]> =>
  sql`hashtext(json_build_array((${clientId})::text, (${userId})::text, (${key})::text)::text)`;

/**
 * Takes a slot of a (client, user, key) throttle for a notification if the sliding window
 * allows (throttleAllows in @notify/core is the same decision): it holds one already (a
 * redelivery), or fewer than `limit` slots were taken after `at - perMs`. It runs in the
 * transaction that records the channels, so a crash undoes both, and a redelivery finds the
 * slot by its key (client, user, key, notification) and takes no second one.
 *
 * Concurrent routings of one key (several lanes, several processors) are serialized by a
 * transaction-scoped advisory lock on the key, taken before the count in a statement of its
 * own (under READ COMMITTED the count's snapshot is then taken after the lock, so it sees every
 * slot committed by the lock's previous holder). A row lock cannot do this: before the first
 * slot of a window there is no row to lock, and FOR UPDATE does not stop a concurrent insert;
 * SERIALIZABLE would need retries on every conflict. The lock goes with the transaction.
 */
export async function takeThrottleSlot(tx: TransactionSql, take: ThrottleTake): Promise<ThrottleTaken> {
  await tx`select pg_advisory_xact_lock(${THROTTLE_LOCK}, ${lockKey(tx, take.clientId, take.userId, take.key)})`;
  const of = tx`client_id = ${take.clientId} and user_id = ${take.userId} and key = ${take.key}`;
  const [row] = await tx<{ held: boolean; inserted: boolean }[]>`
    with held as (
      select 1 from throttle_slots where ${of} and notification_id = ${take.notificationId}
    ), inserted as (
      insert into throttle_slots (client_id, user_id, key, notification_id, taken_at)
      select ${take.clientId}, ${take.userId}, ${take.key}, ${take.notificationId}, ${take.at}
      where not exists (select 1 from held)
        -- Counted up to the limit only: the window's index entries, newest first.
        and (select count(*) from (
              select 1 from throttle_slots
              where ${of} and taken_at > ${new Date(take.at.getTime() - take.perMs)}
              order by taken_at desc limit ${take.limit}) w) < ${take.limit}
      on conflict do nothing
      returning 1
    )
    select exists (select 1 from held) as held, exists (select 1 from inserted) as inserted`;
  const fresh = row?.inserted === true;
  return { granted: fresh || row?.held === true, fresh };
}

/**
 * Gives back a slot this transaction took (the daily cap then stopped the notification: it
 * does not reach the user, so it does not count against its throttle either).
 */
export async function returnThrottleSlot(tx: TransactionSql, take: ThrottleTake): Promise<void> {
  await tx`
    delete from throttle_slots
    where client_id = ${take.clientId} and user_id = ${take.userId} and key = ${take.key}
      and notification_id = ${take.notificationId}`;
}

/**
 * Takes the throttle locks of these notifications (those with a throttle), in the order of the
 * lock keys, so a transaction that takes slots of several keys (a deferral release) never waits
 * on a lock while holding one another such transaction waits on. Held until the transaction ends.
 */
export async function lockThrottles(tx: TransactionSql, notificationIds: readonly string[]): Promise<void> {
  if (notificationIds.length === 0) return;
  // The lock is called per row of the sorted subquery, so in that order.
  await tx`
    select pg_advisory_xact_lock(${THROTTLE_LOCK}, k) from (
      select distinct ${lockKey(tx, tx`client_id`, tx`user_id`, tx`throttle->>'key'`)} as k
      -- Each looked up by its id, in its own partition (log-keys.ts).
      from ${eachId(tx, notificationIds)} i
      cross join lateral (select client_id, user_id, throttle from notifications n where n.id = i.id offset 0) n
      where throttle is not null
      order by k
    ) s`;
}

/** Drops throttle slots taken before `before`; answers how many went. */
export async function purgeThrottleSlots(database: Database, before: Date): Promise<number> {
  const result = await database.sql`delete from throttle_slots where taken_at < ${before}`;
  return result.count;
}
