import type { PendingQuery, Row, TransactionSql } from "postgres";
import type { Sql } from "./pool.js";

/*
 * The notification log (notifications, notification_channels, channel_status_events,
 * delivery_attempts, notification_fallbacks) is partitioned by range of the notification id
 * (drizzle/0028_partitioned_log.sql), and a statement reads only the partitions it needs when
 * PostgreSQL can tell which those are. The services' statements are prepared, and run on a
 * generic plan, which prunes by `key = $1` and by ranges when the executor starts, and by the key
 * of each row of a nested loop, but only once it has set up a scan of every partition, which a
 * bound known at the start spares (`withinIds`). It cannot prune by `key = any($1)` (an array parameter), nor on
 * the side of a join that is hashed: there every partition is read. And the planner costs a
 * lookup per row as if it probed every partition, so it hashes joins with the log readily. A
 * statement that names its notifications by a list therefore looks each one up laterally
 * (`eachId`), or, when it joins or locks the rows as a set, also bounds the key by the list's
 * least and greatest ids (`withinIds`, `withinIdsOf`): one day's ids reach one partition.
 */

type Fragment = PendingQuery<Row[]>;
type AnySql = Sql | TransactionSql;

/** The distinct ids of `ids`, as a FROM item of one column, `id`: `${eachId(sql, ids)} k`. */
export const eachId = (sql: AnySql, ids: readonly string[]): Fragment =>
  sql`(select distinct unnest(${ids as string[]}::text[]) as id)`;

/** An id as newId (libs/core) writes it: a UUID in lowercase hex, the form of the log's bounds. */
const CANONICAL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Ids whose order tells whether a collation orders ids as JavaScript does: every pair of hex
 * digits, side by side and across a hyphen (a collation may read two letters as one, as Danish
 * does "aa" and Welsh "dd"), and digit runs against letters (a collation may compare digits as
 * numbers).
 */
const ORDER_SAMPLES: readonly string[] = (() => {
  const hex = "0123456789abcdef";
  const samples = ["01900000", "0190000a", "09000000", "10000000", "a0000000", "0000000a", "00000010"].map(
    (head) => `${head}-0000-7000-8000-000000000000`,
  );
  for (const a of hex)
    for (const b of hex) {
      samples.push(`0190${a}${b}00-0000-7000-8000-000000000000`, `0190000${a}-${b}000-7000-8000-000000000000`);
    }
  return samples;
})();
const JS_ORDER = [...ORDER_SAMPLES].sort();

/** Pools whose database orders ids as JavaScript does (probeIdOrder). */
const ordersAsJavaScript = new WeakSet<object>();
/** Of those, pools whose server rechecks a locked row correctly after pruning as it starts. */
const prunesLockedLookups = new WeakSet<object>();

/**
 * Whether the database of pool `sql` orders ids (in its default collation, which the log's keys
 * and their partitions' bounds have) as JavaScript does: then withinIds finds a batch's least and
 * greatest ids itself, for that pool. C, POSIX and the common locales do; a collation that reads
 * two letters as one (Danish) or digits as numbers does not. createDb asks when it makes a pool,
 * and again when the pool's server changes version (serverVersionChanged).
 */
export async function probeIdOrder(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ sorted: string[]; version: number }[]>`
    select array_agg(x order by x) as sorted, current_setting('server_version_num')::int as version
    from unnest(${ORDER_SAMPLES as string[]}::text[]) x`;
  const same = row?.sorted.length === JS_ORDER.length && row.sorted.every((id, i) => id === JS_ORDER[i]);
  if (same) ordersAsJavaScript.add(sql);
  else ordersAsJavaScript.delete(sql);
  // PostgreSQL 18 loses a statement's rows when it rechecks a row locked in a subquery that its
  // executor pruned as it started (withinIdsLocking).
  if (same && (row?.version ?? 0) < 180000) prunesLockedLookups.add(sql);
  else prunesLockedLookups.delete(sql);
  return same;
}

/**
 * `column` (a notification id) between the least and the greatest of `ids`: a range the executor
 * prunes the log by when it starts, whatever the plan joins the rows with. Redundant with the
 * statement's own match of the ids, which it leaves as it is.
 *
 * Put it in every lookup of the log by key, the lateral ones too. A lookup per row gets the key
 * only as the statement runs, and a generic plan sets up (and locks) a scan of every partition of
 * the table on every run before it prunes by it: about 4 µs a partition for each such scan, so
 * with RETENTION_DAYS at 90 a statement that reads one channel costs about a millisecond of the
 * server's CPU, a routing several. A bound the executor knows as it starts spares the others.
 *
 * On a pool whose database orders ids as JavaScript does (probeIdOrder), and when every id is a
 * lowercase UUID (as the service makes them), the least and the greatest are found here and
 * passed through concat(): a stable function, which the executor evaluates as it starts and the
 * planner does not, so a custom plan is no cheaper than the generic one and the generic plan is
 * kept. Otherwise (a transaction's connection, a test's ids, a collation of its own) the bounds
 * are subqueries, which the database orders itself but evaluates only once every scan is set up.
 */
export const withinIds = (sql: AnySql, column: string, ids: readonly string[]): Fragment => {
  const bounds = ordersAsJavaScript.has(sql) ? idBounds(ids) : null;
  if (bounds !== null) {
    return sql`${sql.unsafe(column)} between concat(${bounds.least}::text) and concat(${bounds.greatest}::text)`;
  }
  return withinIdsAtRun(sql, column, ids);
};

/**
 * As withinIds, with bounds the executor evaluates once the statement runs (subqueries), never
 * as it starts, so it sets up a scan of every partition and reads only those in range.
 */
const withinIdsAtRun = (sql: AnySql, column: string, ids: readonly string[]): Fragment =>
  sql`${sql.unsafe(column)} between (select min(x) from unnest(${ids as string[]}::text[]) x)
    and (select max(x) from unnest(${ids as string[]}::text[]) x)`;

/**
 * As withinIds, for a statement that locks rows of the log in a subquery (lockChannelKeys,
 * lock-order.ts), its lookup that locks them included. PostgreSQL 18 (18.4 at least) loses such
 * a statement's rows when it rechecks a locked row (another transaction updated it meanwhile)
 * and its executor pruned partitions as it started: on a pool whose server is 18 or later (as
 * probeIdOrder finds) the bounds are evaluated as the statement runs, which sets up a scan of
 * every partition, and the lookup that locks is left unbounded (`true`), pruned per row.
 */
export const withinIdsLocking = (
  sql: AnySql,
  column: string,
  ids: readonly string[],
  where: "locked" | "other" = "other",
): Fragment => {
  if (prunesLockedLookups.has(sql)) return withinIds(sql, column, ids);
  return where === "locked" ? sql`true` : withinIdsAtRun(sql, column, ids);
};

/**
 * The least and the greatest of `ids` as JavaScript orders them, when every one is a lowercase
 * UUID, else null. Only for a pool whose database orders ids alike (probeIdOrder).
 */
export function idBounds(ids: readonly string[]): { least: string; greatest: string } | null {
  const [first] = ids;
  if (first === undefined || !ids.every((id) => CANONICAL_ID.test(id))) return null;
  let [least, greatest] = [first, first];
  for (const id of ids) {
    if (id < least) least = id;
    if (id > greatest) greatest = id;
  }
  return { least, greatest };
}

/**
 * Told that a connection of pool `sql` reports server version `version` (postgres.js's
 * onparameter): a pool on PostgreSQL 18 or later (a switch-over, an upgrade in place) stops
 * bounding its locking statements as the executor starts at once, and the pool asks its server
 * again (probeIdOrder).
 */
export function serverVersionChanged(sql: Sql, version: string): void {
  if (Number.parseInt(version, 10) >= 18) prunesLockedLookups.delete(sql);
  probeIdOrder(sql).catch(() => {});
}

/** Whether pool `sql` bounds its locking statements as the executor starts (withinIdsLocking). */
export const boundsLockingAsItStarts = (sql: AnySql): boolean => prunesLockedLookups.has(sql);

/** Whether pool `sql`'s database orders ids as JavaScript does (probeIdOrder has said so). */
export const ordersIdsAsJavaScript = (sql: AnySql): boolean => ordersAsJavaScript.has(sql);

/** As `withinIds`, for the ids of column `key` of the statement's CTE `rows`. */
export const withinIdsOf = (sql: AnySql, column: string, rows: string, key: string): Fragment =>
  sql`${sql.unsafe(column)} between (select min(${sql.unsafe(key)}) from ${sql.unsafe(rows)})
    and (select max(${sql.unsafe(key)}) from ${sql.unsafe(rows)})`;

/** A UUIDv7, as newId (libs/core) makes every notification id: its first 48 bits are its time. */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Whether every id is a UUIDv7, so that its time bounds where it is in the log. */
export const timeOrdered = (ids: readonly string[]): boolean => ids.every((id) => UUID_V7.test(id));

/**
 * `column` (a notification id) among the ids of column `key` of the statement's CTE `rows`, and
 * within their range (withinIdsOf): for an UPDATE of the log joined with the rows it locked. How
 * an UPDATE finds its target rows is the planner's to choose, and a prepared statement's generic
 * plan, made while the log's partitions had no statistics, costs a lookup per row as one probe of
 * every partition and would rather hash or sort whole partitions: as a scan condition of its own
 * the list makes every partition it reads an index scan of a few keys.
 */
export const amongIdsOf = (sql: AnySql, column: string, rows: string, key: string): Fragment =>
  sql`${sql.unsafe(column)} = any(array(select ${sql.unsafe(key)} from ${sql.unsafe(rows)}))
    and ${withinIdsOf(sql, column, rows, key)}`;
