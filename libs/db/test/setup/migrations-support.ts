import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TEST_PG_URL } from "@notify/testing";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import type { Test } from "tap";
import { MIGRATIONS_FOLDER } from "../../src/setup/migrate.js";

/** A copy of the migrations folder as it was up to migration `lastIdx`: a database before a migration. */
export function foldersUpTo(lastIdx: number): string {
  const dir = mkdtempSync(join(tmpdir(), "notify-migrations-"));
  cpSync(MIGRATIONS_FOLDER, dir, { recursive: true });
  const journalFile = join(dir, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalFile, "utf8")) as { entries: Array<{ idx: number }> };
  journal.entries = journal.entries.filter((e) => e.idx <= lastIdx);
  writeFileSync(journalFile, JSON.stringify(journal));
  return dir;
}

/**
 * Runs the migrations of `folder` (all of them by default) on the database at `url`, on a
 * connection of its own: drizzle makes its client hand dates back as text.
 */
export async function migrateTo(url: string, folder = MIGRATIONS_FOLDER): Promise<void> {
  const migrator = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle(migrator), { migrationsFolder: folder });
  } finally {
    await migrator.end();
  }
}

/**
 * A database of its own at migration `lastIdx`, dropped when `t` ends: its url and a pool of
 * `max` connections to it.
 */
export async function databaseAt(t: Test, lastIdx: number, max = 1): Promise<{ url: string; sql: postgres.Sql }> {
  const name = `notify_m_${randomBytes(6).toString("hex")}`;
  const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(TEST_PG_URL);
  url.pathname = `/${name}`;
  const sql = postgres(url.toString(), { max, onnotice: () => {} });
  t.teardown(async () => {
    await sql.end();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  await migrateTo(url.toString(), foldersUpTo(lastIdx));
  return { url: url.toString(), sql };
}
