import DataLoader from "dataloader";
import type { PendingQuery, Row } from "postgres";
import type { Sql } from "./pool.js";

/*
 * The batched statements every email passes through (ingest's accept, routing and the profile
 * read, the worker's channel read and status move) take each column of a batch as one array,
 * unnested, and read every array through a scalar subquery: `unnest((select $1::text[]), ...)`,
 * not `unnest($1::text[], ...)`. PostgreSQL plans a prepared statement for its parameters'
 * values (a custom plan) until a plan for any values (the generic plan) looks no dearer; given
 * the array itself it counts the batch's rows, a few under a steady load, while the generic plan
 * assumes ten, so it would plan again on every run, and planning these statements costs more than
 * running them. Behind a subquery the length is unknown to both plans, the generic one is kept
 * after the first five runs, and each run costs an initplan of a few microseconds.
 * `unnestColumns` writes that form; the batched statements take their columns through it.
 */

/** The element types a batch's columns travel as. */
export type ColumnType = "text" | "int" | "timestamptz";

/** One column of a batch: its element type and a value per row (null for none). */
export type BatchColumn = readonly [type: ColumnType, values: readonly unknown[]];

const COLUMN_NAME = /^[a-z_][a-z0-9_]*$/;
const COLUMN_TYPES: ReadonlySet<string> = new Set<ColumnType>(["text", "int", "timestamptz"]);

/**
 * A batch's columns as rows, for a `from` clause: `unnest((select $1::text[]), (select
 * $2::int[]), ...) as alias(name, ...)`, in the order given, each array behind its subquery as
 * said above. Every array holds one value per row. The names and the alias are the caller's
 * own constants (checked, never input); the values travel as parameters.
 */
export function unnestColumns(
  sql: Sql,
  alias: string,
  columns: Readonly<Record<string, BatchColumn>>,
): PendingQuery<Row[]> {
  const names = Object.keys(columns);
  if (names.length === 0) throw new Error("unnestColumns: no columns");
  for (const name of [alias, ...names]) {
    if (!COLUMN_NAME.test(name)) throw new Error(`unnestColumns: "${name}" is not a plain column name`);
  }
  const arrays = names.map((name, i) => {
    const [type, values] = columns[name] as BatchColumn;
    if (!COLUMN_TYPES.has(type)) throw new Error(`unnestColumns: "${type}" is not a column type it takes`);
    const array = sql`(select ${values as never}::${sql.unsafe(type)}[])`;
    return i === 0 ? array : sql`, ${array}`;
  });
  return sql`unnest(${arrays}) as ${sql.unsafe(`${alias}(${names.join(", ")})`)}`;
}

/** Most calls one statement takes: a larger iteration's calls go in several. */
export const MAX_BATCH = 256;

/**
 * Most batches of one kind in flight at once. Another batch gathers meanwhile and goes when one
 * of them is answered (group commit): under load a statement carries what piled up while the
 * earlier ones ran, instead of each event-loop iteration sending its own few. A statement held
 * up (a lock, until its statement timeout) holds up the calls of its kind behind it; with two,
 * the other slot still serves.
 */
export const MAX_IN_FLIGHT = 2;

export interface BatchOptions<K> {
  /**
   * For writes. Names what a call changes. Calls that change the same thing never share a
   * statement: the batch goes in rounds, each holding at most one call per name, in call order,
   * one round (and one statement of a large round) after the other, so each call sees the ones
   * made before it as it would have without batching. And a statement that fails on its data
   * (a constraint or a value: SQLSTATE classes 22 and 23) runs again one call at a time, so one
   * bad row fails only its own call; any other failure (timeout, lost connection, deadlock)
   * fails every call of the statement at once.
   */
  writes?: (key: K) => string;
  /** Batches in flight at once (MAX_IN_FLIGHT unless set); the next waits for one to end. */
  inFlight?: number;
  /**
   * While a batch is in flight, the next goes out in a free slot only once this many calls wait
   * for it, or `overlapMs` after a slot was free for it, or once nothing is in flight, whichever
   * comes first. 1 (unless set): on the next iteration, as the first. See `GATHER`.
   */
  overlapAt?: number;
  /** The longest a batch waits for company while a slot is free (OVERLAP_MS unless set). */
  overlapMs?: number;
}

/** How long a batch waits for company, at most, while a slot is free (`overlapAt`). */
export const OVERLAP_MS = 2;

/**
 * For the statements every email passes through (the worker's channel read and status move,
 * routing and its profile read): under load a statement's fixed cost is most of its cost, so a
 * second batch waits a moment for company rather than going for whoever arrived just after the
 * first left: fewer, larger statements cost PostgreSQL less per send. When idle a call still goes
 * at once; a statement held up (a lock) delays the calls behind it by OVERLAP_MS at most, then
 * the other slot serves.
 */
export const GATHER = { overlapAt: 16 } as const;

/** An error about one row's data, which the same call alone would meet again. */
const aboutData = (error: unknown): boolean => /^2[23]/.test(String((error as { code?: unknown }).code ?? ""));

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

const chunks = <K>(keys: readonly K[]): K[][] => {
  const out: K[][] = [];
  for (let i = 0; i < keys.length; i += MAX_BATCH) out.push(keys.slice(i, i + MAX_BATCH));
  return out;
};

/**
 * The calls of a batch in rounds: a call goes in the round after the last one holding a call of
 * its name, so no round holds a name twice and each name's calls keep their order. Answers the
 * rounds as indexes into `names`.
 */
export function rounds(names: readonly string[]): number[][] {
  const seen = new Map<string, number>();
  const out: number[][] = [];
  names.forEach((name, i) => {
    const round = seen.get(name) ?? 0;
    seen.set(name, round + 1);
    if (round === out.length) out.push([]);
    out[round]?.push(i);
  });
  return out;
}

/**
 * Gathers the calls made during one event-loop iteration into one call of `run` in its check
 * phase: a busy app starts many handlers per iteration (each pulled message, each provider
 * answer), and one statement for all of them costs PostgreSQL and the connection far less than
 * one each (a statement's parse, plan and round trip are paid once per batch, not per key). While
 * `inFlight` batches run, the next keeps gathering, across iterations, until one ends (with
 * `overlapAt` set and others still in flight: until enough calls wait or `overlapMs` passes).
 * Nothing is cached: every call reads afresh. `run` answers one value per key, in the keys'
 * order; when it fails, every call of that statement fails with its error (writes: see
 * `BatchOptions`).
 */
export function perIteration<K, V>(
  run: (keys: readonly K[]) => Promise<V[]>,
  options: BatchOptions<K> = {},
): (key: K) => Promise<V> {
  const { writes, inFlight: limit = MAX_IN_FLIGHT, overlapAt = 1, overlapMs = OVERLAP_MS } = options;
  // Below one nothing would ever be sent and every call would wait for good.
  if (!(Number.isInteger(limit) && limit >= 1)) throw new RangeError(`inFlight must be a whole number >= 1 (${limit})`);
  if (!(Number.isInteger(overlapAt) && overlapAt >= 1)) {
    throw new RangeError(`overlapAt must be a whole number >= 1 (${overlapAt})`);
  }
  if (!(Number.isFinite(overlapMs) && overlapMs >= 0)) {
    throw new RangeError(`overlapMs must be a finite number >= 0 (${overlapMs})`);
  }
  let running = 0;
  // Calls in the batch being gathered (DataLoader gathers one at a time, so at most one is held).
  let gathering = 0;
  let held: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const mayGo = () => running === 0 || (running < limit && gathering >= overlapAt);
  const release = () => {
    clearTimeout(timer);
    timer = undefined;
    const next = held;
    held = undefined;
    next?.();
  };
  // The held batch goes if it may; otherwise, with a slot free, after overlapMs at the latest
  // (nothing can start meanwhile, so the slot is still free then). Looked at whenever that may
  // change: when the batch is ready, when a call joins it, when a batch ends.
  const consider = () => {
    if (held === undefined) return;
    if (mayGo()) release();
    else if (running < limit) timer ??= setTimeout(release, overlapMs);
  };
  const schedule = (dispatch: () => void) =>
    setImmediate(() => {
      held = dispatch;
      consider();
    });
  const oneByOne = async (keys: readonly K[]): Promise<Array<V | Error>> => {
    const results: Array<V | Error> = [];
    for (const key of keys) {
      try {
        results.push(...(await run([key])));
      } catch (error) {
        results.push(asError(error));
      }
    }
    return results;
  };
  const write = async (keys: readonly K[]): Promise<Array<V | Error>> => {
    if (keys.length === 1) return run(keys);
    try {
      return await run(keys);
    } catch (error) {
      if (!aboutData(error)) throw error;
      return oneByOne(keys);
    }
  };
  const batch = async (keys: readonly K[]): Promise<Array<V | Error>> => {
    if (!writes) {
      if (keys.length <= MAX_BATCH) return run(keys);
      // One statement at a time, as a batch counts once in flight: a large batch (gathered
      // while others ran) does not take the whole pool at once.
      const answers: Array<V | Error> = [];
      for (const part of chunks(keys)) answers.push(...(await run(part)));
      return answers;
    }
    const results = new Array<V | Error>(keys.length);
    for (const round of rounds(keys.map(writes))) {
      for (const part of chunks(round)) {
        let answers: Array<V | Error>;
        try {
          answers = await write(part.map((i) => keys[i] as K));
        } catch (error) {
          answers = part.map(() => asError(error));
        }
        part.forEach((index, j) => {
          results[index] = answers[j] as V | Error;
        });
      }
    }
    return results;
  };
  const inFlight = async (keys: readonly K[]): Promise<Array<V | Error>> => {
    running++;
    gathering = 0;
    try {
      return await batch(keys);
    } finally {
      running--;
      consider();
    }
  };
  const loader = new DataLoader<K, V>(inFlight, {
    cache: false,
    // One batch at a time, split above into statements sent one after another: DataLoader's own
    // split would send the parts at once.
    maxBatchSize: Number.POSITIVE_INFINITY,
    batchScheduleFn: schedule,
  });
  return (key) => {
    const answer = loader.load(key);
    gathering++;
    consider();
    return answer;
  };
}

/**
 * `perIteration` kept per owner (a connection pool), made on first use: callers pass the pool
 * they already have and share its batches.
 */
export function perIterationOf<O extends object, K, V>(
  run: (owner: O, keys: readonly K[]) => Promise<V[]>,
  options: BatchOptions<K> = {},
): (owner: O, key: K) => Promise<V> {
  const batches = new WeakMap<O, (key: K) => Promise<V>>();
  return (owner, key) => {
    let load = batches.get(owner);
    if (!load) {
      load = perIteration((keys: readonly K[]) => run(owner, keys), options);
      batches.set(owner, load);
    }
    return load(key);
  };
}

/**
 * Orders a batch by a string key (any fixed order does: it only has to be the same everywhere),
 * so that two batches over the same rows lock them in the same order.
 */
export const byKey =
  <T>(key: (item: T) => string) =>
  (a: T, b: T): number => {
    const x = key(a);
    const y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };
