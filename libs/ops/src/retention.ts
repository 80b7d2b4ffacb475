import { createReadStream, createWriteStream, mkdirSync, readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pipeline } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";
import { type ArchiveLine, type ArchiveRecord, type Database, restoreArchived, takeArchiveBatch } from "@notify/db";

/** How long the live notification log keeps a notification before archiving it. */
export const DEFAULT_RETENTION_DAYS = 90;
export const ARCHIVE_BATCH = 1000;

async function writeGzipLines(file: string, lines: string[]): Promise<void> {
  const partial = `${file}.partial`;
  await pipeline(
    (async function* () {
      for (const line of lines) yield `${line}\n`;
    })(),
    createGzip(),
    createWriteStream(partial, { flush: true }),
  );
  // A file under its final name is complete: a crash mid-write leaves only a .partial.
  renameSync(partial, file);
}

/**
 * Archives one batch of notifications older than `days` out of the live log: writes them to
 * `<dir>/<YYYY-MM>/<time>-<first id>.ndjson.gz` (the month of their created_at) before the
 * transaction that deletes them commits, so the file exists before the rows are gone. A crash
 * after the file was written and before the commit archives the rows again into another file:
 * a restore keeps one copy.
 */
export async function archiveBatch(
  database: Database,
  options: { dir: string; days: number; batchSize?: number },
): Promise<number> {
  return takeArchiveBatch(
    database,
    { days: options.days, batchSize: options.batchSize ?? ARCHIVE_BATCH },
    async (rows) => {
      const byMonth = new Map<string, ArchiveLine[]>();
      for (const row of rows) byMonth.set(row.month, [...(byMonth.get(row.month) ?? []), row]);
      for (const [month, monthRows] of byMonth) {
        mkdirSync(join(options.dir, month), { recursive: true });
        const name = `${new Date().toISOString().replace(/[:.]/g, "")}-${monthRows[0]?.id}.ndjson.gz`;
        await writeGzipLines(
          join(options.dir, month, name),
          monthRows.map((r) => r.line),
        );
      }
    },
  );
}

/** Archives batch after batch until nothing is older than the window. */
export async function archiveAll(
  database: Database,
  options: { dir: string; days: number; batchSize?: number },
): Promise<number> {
  let total = 0;
  for (;;) {
    const archived = await archiveBatch(database, options);
    total += archived;
    if (archived === 0) return total;
  }
}

function* archiveFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* archiveFiles(path);
    else if (entry.name.endsWith(".ndjson.gz")) yield path;
  }
}

/**
 * Brings a user's archived notifications back into the live log, with their channels, history
 * and attempts, reading the archive a line at a time. A notification already live is left
 * alone, so a restore can be repeated. Restored rows are still past the window: the next
 * retention run archives them again.
 */
export async function restoreUser(database: Database, dir: string, userId: string): Promise<number> {
  let restored = 0;
  for (const file of archiveFiles(dir)) {
    const lines = createInterface({
      input: createReadStream(file).pipe(createGunzip()),
      crlfDelay: Number.POSITIVE_INFINITY,
    });
    for await (const line of lines) {
      if (!line.includes(JSON.stringify(userId))) continue;
      const record = JSON.parse(line) as ArchiveRecord;
      if (record.notification.user_id !== userId) continue;
      if (await restoreArchived(database, record)) restored++;
    }
  }
  return restored;
}
