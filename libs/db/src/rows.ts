import type { Table } from "drizzle-orm";

/**
 * Row types for queries written with postgres.js, derived from the drizzle schema so a column
 * renamed or retyped there fails to compile here. postgres.js returns columns under their SQL
 * names (snake_case) and parses timestamptz into Date, the same types drizzle infers with
 * `mode: "date"`; only the keys differ, and `Row` maps them.
 */
type Snake<S extends string> = S extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${Snake<Tail>}`
  : S;

/** One row of `table` as postgres.js returns it from `select *`. */
export type Row<T extends Table> = { [K in keyof T["$inferSelect"] as Snake<K & string>]: T["$inferSelect"][K] };

/** Some columns of a row, for queries that select fewer. */
export type RowPick<T extends Table, K extends keyof Row<T>> = Pick<Row<T>, K>;
