import { createReadStream, createWriteStream, mkdirSync, readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pipeline } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";
import type { Database } from "@notify/db";
import { type Command, type CommandGroup, parseOptions, UsageError } from "./command.js";

/** The spec's retention of the live notification log. */
export const DEFAULT_RETENTION_DAYS = 90;
export const ARCHIVE_BATCH = 1000;

/**
 * One archived notification, one NDJSON line: the row and everything that hangs off it, each
 * as Postgres' own JSON of the row (`to_json`), so a restore maps it back with
 * jsonb_populate_record and nothing is lost, timestamps to the microsecond included.
 */
export interface ArchiveRecord {
  version: 1;
  notification: { id: string; user_id: string; created_at: string } & Record<string, unknown>;
  channels: Record<string, unknown>[];
  status_events: Record<string, unknown>[];
  attempts: Record<string, unknown>[];
}

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
 * `<dir>/<YYYY-MM>/<time>-<first id>.ndjson.gz` (the month of their created_at) and deletes
 * them (their channels, history and attempts go with them) in the same short transaction, so
 * the file exists before the rows are gone. SKIP LOCKED and a bounded batch keep it from
 * blocking ingest or another archiver. A crash after the file was written and before the
 * commit archives the rows again into another file: a restore keeps one copy.
 */
export async function archiveBatch(
  database: Database,
  options: { dir: string; days: number; batchSize?: number },
): Promise<number> {
  return database.sql.begin(async (tx) => {
    const rows = await tx<{ id: string; month: string; line: string }[]>`
      select n.id, to_char(n.created_at at time zone 'UTC', 'YYYY-MM') as month,
        json_build_object(
          'version', 1,
          'notification', to_json(n),
          'channels', (select coalesce(json_agg(c), '[]') from notification_channels c where c.notification_id = n.id),
          'status_events', (select coalesce(json_agg(e order by e.id), '[]') from channel_status_events e where e.notification_id = n.id),
          'attempts', (select coalesce(json_agg(a), '[]') from delivery_attempts a where a.notification_id = n.id)
        )::text as line
      from notifications n
      where n.created_at < now() - make_interval(days => ${options.days})
        and not exists (select 1 from publish_outbox o where n.id = any(o.notification_ids))
      limit ${options.batchSize ?? ARCHIVE_BATCH}
      for update of n skip locked`;
    if (rows.length === 0) return 0;
    const byMonth = new Map<string, Array<{ id: string; line: string }>>();
    for (const row of rows) byMonth.set(row.month, [...(byMonth.get(row.month) ?? []), row]);
    for (const [month, monthRows] of byMonth) {
      mkdirSync(join(options.dir, month), { recursive: true });
      const name = `${new Date().toISOString().replace(/[:.]/g, "")}-${monthRows[0]?.id}.ndjson.gz`;
      await writeGzipLines(
        join(options.dir, month, name),
        monthRows.map((r) => r.line),
      );
    }
    await tx`delete from notifications where id = any(${rows.map((r) => r.id)}::text[])`;
    return rows.length;
  });
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
      const json = database.sql.json;
      await database.sql.begin(async (tx) => {
        const [inserted] = await tx`insert into notifications
          select * from jsonb_populate_record(null::notifications, ${json(record.notification as never)})
          on conflict do nothing returning id`;
        if (!inserted) return;
        restored++;
        await tx`insert into notification_channels
          select * from jsonb_populate_recordset(null::notification_channels, ${json(record.channels as never)})`;
        await tx`insert into channel_status_events overriding system value
          select * from jsonb_populate_recordset(null::channel_status_events, ${json(record.status_events as never)})
          on conflict do nothing`;
        await tx`insert into delivery_attempts
          select * from jsonb_populate_recordset(null::delivery_attempts, ${json(record.attempts as never)})`;
      });
    }
  }
  return restored;
}

function days(value: string | undefined): number {
  if (value === undefined) return DEFAULT_RETENTION_DAYS;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= 36_500)) throw new UsageError("--days must be a whole number of days, 1 or more");
  return n;
}

const run: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { dir: { type: "string" }, days: { type: "string" } }, []);
  if (!values.dir) throw new UsageError("--dir is required (the archive folder, ARCHIVE_DIR of the processor)");
  const archived = await archiveAll(deps.database, { dir: values.dir, days: days(values.days) });
  io.stdout.write(`archived ${archived} notifications into ${values.dir}\n`);
};

const restore: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { dir: { type: "string" }, user: { type: "string" } }, []);
  if (!values.dir || !values.user) throw new UsageError("--dir and --user are required");
  const restored = await restoreUser(deps.database, values.dir, values.user);
  io.stdout.write(`restored ${restored} notifications of ${values.user}\n`);
};

export const retention: CommandGroup = {
  name: "retention",
  usage: `Retention (the live log keeps ${DEFAULT_RETENTION_DAYS} days; older notifications go to gzipped NDJSON per month):
  notify retention run --dir DIR [--days N]
      Archive every notification older than N days (default ${DEFAULT_RETENTION_DAYS}) into DIR/YYYY-MM/ and
      remove it from the live log, ${ARCHIVE_BATCH} per transaction (the processor does this on a timer too).
  notify retention restore --dir DIR --user USER
      Bring a user's archived notifications back into the live log.`,
  commands: { run, restore },
};
