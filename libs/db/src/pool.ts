import postgres from "postgres";
import { probeIdOrder, serverVersionChanged } from "./log-keys.js";

export type Sql = postgres.Sql;

export interface DbConfig {
  url: string;
  /** Pool size. Hot paths batch, so a handful of connections go a long way. */
  max?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
  /**
   * Seconds to wait before reconnecting after a failed attempt; by default postgres.js's backoff,
   * which grows to 20 s. While Postgres is down each failed attempt fails one queued query, so
   * this also paces the 503s of requests waiting in line (outage tests set it low).
   */
  reconnectDelaySeconds?: number;
  /**
   * Postgres statement_timeout of every connection, in ms: a statement running longer is
   * cancelled (SQLSTATE 57014), so a stuck query cannot hold a connection, and the request
   * waiting on it, forever. 0 turns it off; by default 15 000.
   */
  statementTimeoutMs?: number;
}

/** statement_timeout of a pool that sets none. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 15_000;

/**
 * One postgres.js pool per process, and every query goes through it. drizzle defines the schema
 * and the migrations but runs no queries: its postgres-js driver rewrites its client's type
 * parsers and serializers (timestamps stay strings, JSON passes through unserialized), so the
 * data layer queries through postgres.js with row types derived from the schema (rows.ts).
 */
export interface Database {
  sql: Sql;
  close(): Promise<void>;
  /** Readiness: a round trip to the server. */
  ping(): Promise<boolean>;
}

/**
 * A pool of connections with the service's settings. postgres.js is installed with
 * patches/postgres+3.4.9.patch (npm's postinstall applies it): its Query and Result name their
 * species with a data property instead of a getter, without which V8 aborts every optimization of
 * their constructors, over and over, for as long as the process runs.
 */
export function createDb(config: DbConfig): Database {
  const delay = config.reconnectDelaySeconds;
  const options = {
    idle_timeout: 30,
    connect_timeout: 5,
    onnotice: () => {},
    connection: {
      application_name: config.applicationName ?? "notify",
      statement_timeout: config.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
      // No JIT compilation: the service's statements read and write a few rows by key, but on the
      // partitioned log a month of daily partitions multiplies their estimated cost past
      // jit_above_cost, and PostgreSQL then spends 1-2 s compiling a poll that finds nothing.
      jit: "off",
    },
    ...(delay === undefined ? {} : { backoff: () => delay }),
  };
  let pool: Sql | undefined;
  let version: string | undefined;
  let probeFailed = false;
  const sql = postgres(config.url, {
    ...options,
    max: config.max ?? 10,
    // A server of another version behind the same address (a switch-over, an upgrade in place)
    // may need the log's locking statements bounded otherwise (withinIdsLocking): postgres.js
    // reports the version a connection finds first and on every change. The first is of the
    // server the probe below asks, unless that probe failed (no server answered yet).
    onparameter: (key: string, value: string) => {
      if (key !== "server_version" || pool === undefined) return;
      if (version !== undefined || probeFailed) serverVersionChanged(pool, value);
      version = value;
    },
  });
  pool = sql;
  // Whether the database orders ids as JavaScript does, which spares the log's lookups by key
  // the set-up of every partition (withinIds). Until it answers, or if it cannot, they go the way
  // that holds in any collation.
  probeIdOrder(sql).catch(() => {
    probeFailed = true;
  });
  return {
    sql,
    close: async () => {
      await sql.end({ timeout: 5 });
    },
    ping: async () => {
      try {
        await sql`select 1`;
        return true;
      } catch {
        return false;
      }
    },
  };
}
