import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema/index.js";

export * from "./api-keys.js";
export * from "./audiences.js";
export * from "./schema/index.js";
export { schema };
export type Db = PostgresJsDatabase<typeof schema>;
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
}

export interface Database {
  db: Db;
  /** postgres.js for hot paths (multi-row inserts): drizzle costs ~30 ms per 1000-row insert. */
  sql: Sql;
  close(): Promise<void>;
  /** Readiness: a round trip to the server. */
  ping(): Promise<boolean>;
}

export function createDb(config: DbConfig): Database {
  const delay = config.reconnectDelaySeconds;
  const options = {
    idle_timeout: 30,
    connect_timeout: 5,
    onnotice: () => {},
    connection: { application_name: config.applicationName ?? "notify" },
    ...(delay === undefined ? {} : { backoff: () => delay }),
  };
  const sql = postgres(config.url, { ...options, max: config.max ?? 10 });
  // drizzle rewires its client's type parsers and serializers (timestamps stay strings, JSON
  // is passed through unserialized), so it gets a client of its own and raw queries keep
  // postgres.js's defaults.
  const drizzleClient = postgres(config.url, { ...options, max: Math.max(1, Math.ceil((config.max ?? 10) / 4)) });
  const db = drizzle(drizzleClient, { schema });
  return {
    db,
    sql,
    close: async () => {
      await Promise.all([sql.end({ timeout: 5 }), drizzleClient.end({ timeout: 5 })]);
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
export * from "./broadcasts.js";
export { MIGRATIONS_FOLDER, runMigrations } from "./migrate.js";
export type { Row, RowPick } from "./rows.js";
export * from "./seed.js";
