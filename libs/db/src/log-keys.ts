import type { PendingQuery, Row, TransactionSql } from "postgres";
import type { Sql } from "./pool.js";

/*
 * The notification log (notifications, notification_channels, channel_status_events,
 * delivery_attempts, notification_fallbacks) is partitioned by range of the notification id
 * (drizzle/0028_partitioned_log.sql), and a statement reads only the partitions it needs when
 * PostgreSQL can tell which those are. The services' statements are prepared, and run on a
 * generic plan, which prunes by `key = $1` and by ranges when the executor starts, and by the key
 * of each row of a nested loop. It cannot prune by `key = any($1)` (an array parameter), nor on
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

/**
 * `column` (a notification id) between the least and the greatest of `ids`: a range the executor
 * prunes the log by when it starts, whatever the plan joins the rows with. Redundant with the
 * statement's own match of the ids, which it leaves as it is.
 */
export const withinIds = (sql: AnySql, column: string, ids: readonly string[]): Fragment =>
  sql`${sql.unsafe(column)} between (select min(x) from unnest(${ids as string[]}::text[]) x)
    and (select max(x) from unnest(${ids as string[]}::text[]) x)`;

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
