import type { Database } from "../pool.js";
import type { ArchiveLine } from "./archive.js";

/**
 * One range partition of the notification log (the same range and suffix on all five tables:
 * notifications, notification_channels, channel_status_events, delivery_attempts,
 * notification_fallbacks). `fromAt` is null on the first partition (every id before the log was
 * partitioned).
 */
export interface LogPartition {
  suffix: string;
  fromId: string | null;
  toId: string;
  fromAt: Date | null;
  toAt: Date;
}

/** How long making or detaching a partition may wait for the tables' lock before it tries later. */
const LOCK_TIMEOUT = "2s";

/** The log's range partitions, oldest first (the default partition is not one). */
export async function logPartitions(database: Database): Promise<LogPartition[]> {
  return database.sql<LogPartition[]>`
    select suffix, from_id as "fromId", to_id as "toId", from_at as "fromAt", to_at as "toAt"
    from notify_log_partitions where not is_default order by to_id`;
}

/**
 * Makes the log's partitions, `widthHours` wide, up to `aheadMs` from now; answers how many
 * ranges it made. A range the default partition already took rows of (the job was behind) gets
 * them moved in. Waits at most LOCK_TIMEOUT for the tables' lock and throws if it did not get it.
 */
export async function extendLog(database: Database, options: { aheadMs: number; widthHours: number }): Promise<number> {
  return database.sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    const [row] = await tx<{ made: number }[]>`
      select notify_log_extend(now() + make_interval(secs => ${options.aheadMs / 1000}),
                               make_interval(hours => ${options.widthHours})) as made`;
    return row?.made ?? 0;
  });
}

/**
 * The range partitions wholly older than `days` (their upper bound is `days` or more before
 * `asOf`, the database's clock by default), oldest first: retention's to retire.
 */
export async function partitionsPastRetention(database: Database, days: number, asOf?: Date): Promise<LogPartition[]> {
  return database.sql<LogPartition[]>`
    select suffix, from_id as "fromId", to_id as "toId", from_at as "fromAt", to_at as "toAt"
    from notify_log_partitions
    where not is_default
      and to_at <= coalesce(${asOf ?? null}::timestamptz, now()) - make_interval(days => ${days})
    order by to_id`;
}

/**
 * Detaches a range partition from the log (all five tables, in one transaction): its rows leave
 * the live log at once, but for the notifications that still have work to do (in the publish
 * outbox, deferred, in a digest not sent yet), which move to the default partition and stay.
 * Answers how many were kept. The detached tables wait for archiveDetachedLines and dropDetached.
 */
export async function detachPartition(database: Database, suffix: string): Promise<number> {
  return database.sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    const [row] = await tx<{ kept: number }[]>`select notify_log_detach(${suffix}) as kept`;
    return row?.kept ?? 0;
  });
}

/** The detached partitions not dropped yet (a crash can leave one between archive and drop). */
export async function detachedPartitions(database: Database): Promise<string[]> {
  const rows = await database.sql<{ suffix: string }[]>`select suffix from notify_log_detached order by suffix`;
  return rows.map((row) => row.suffix);
}

/**
 * Up to `count` of a detached partition's notifications after id `after` (id order), each as one
 * archive record: the same shape as the row-by-row archive's.
 */
export async function detachedLines(
  database: Database,
  suffix: string,
  after: string,
  count: number,
): Promise<ArchiveLine[]> {
  return database.sql<ArchiveLine[]>`
    select id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, line
    from notify_log_archive_lines(${suffix}, ${after}, ${count})`;
}

/** Drops a detached partition's tables (never a live one). */
export async function dropDetached(database: Database, suffix: string): Promise<void> {
  await database.sql`select notify_log_drop(${suffix})`;
}

/**
 * Makes the idempotency guard's daily partitions from today through the days a claim made now
 * writes ahead (its window), and `marginDays` more for a job that runs late; answers how many it
 * made. Rows the default partition took for a day being made move in. Waits at most LOCK_TIMEOUT
 * for the table's lock and throws if it did not get it.
 */
export async function extendIdempotencyKeys(
  database: Database,
  options: { windowHours: number; marginDays: number },
): Promise<number> {
  return database.sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    const [row] = await tx<{ made: number }[]>`
      select notify_idempotency_extend(now() + make_interval(hours => ${options.windowHours}, days => ${options.marginDays})) as made`;
    return row?.made ?? 0;
  });
}

/**
 * Drops the idempotency guard's partitions of days no claim or read reaches (an hour after
 * the day's end), and empties the legacy table once its records are past the window; answers how
 * many partitions it dropped. Waits at most LOCK_TIMEOUT for the table's lock.
 */
export async function retireIdempotencyKeys(database: Database, windowHours: number): Promise<number> {
  return database.sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    const [row] = await tx<{ dropped: number }[]>`
      select notify_idempotency_retire(make_interval(hours => ${windowHours})) as dropped`;
    return row?.dropped ?? 0;
  });
}
