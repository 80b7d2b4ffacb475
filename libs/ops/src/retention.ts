import { createHash } from "node:crypto";
import type { Readable } from "node:stream";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { StringDecoder } from "node:string_decoder";
import { promisify } from "node:util";
import { createGunzip, gzip } from "node:zlib";
import { type ArchiveLine, type ArchiveRecord, type Database, restoreArchived, takeArchiveBatch } from "@notify/db";
import type { ArchiveStore } from "./archive-store.js";

/** How long the live notification log keeps a notification before archiving it. */
export const DEFAULT_RETENTION_DAYS = 90;
export const ARCHIVE_BATCH = 1000;

const gzipAsync = promisify(gzip);

/**
 * What a manifest says about its data object. Written after the data object, so a manifest names
 * only complete data; readers take only data a manifest names (a data object without one is left
 * by a run that failed before its rows were deleted: they are live or in another object).
 */
export interface ArchiveManifest {
  format: "notify-archive";
  /** Of the manifest and of the data object's layout (gzip NDJSON, one ArchiveRecord per line). */
  version: 1;
  /** The data object's key, relative to the archive's root, in the manifest's own folder. */
  data: string;
  /** Lines (notifications) in the data object. */
  records: number;
  /** Size of the gzip body in bytes. */
  bytes: number;
  /** sha256 of the gzip body, hex. */
  sha256: string;
  /** The lowest and highest notification id in it: ids are UUIDv7, so they order by time. */
  first_id: string;
  last_id: string;
  /** The earliest and latest created_at in it, ISO 8601 UTC to the microsecond. */
  created_from: string;
  created_to: string;
  /** When the archiver wrote it. */
  written_at: string;
}

/** An archive object that is not what its manifest says, or not readable at all. */
export class ArchiveIntegrityError extends Error {
  readonly key: string;
  constructor(message: string, key: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ArchiveIntegrityError";
    this.key = key;
  }
}

const DAY_DATA = /^(\d{4})\/(\d{2})\/(\d{2})\/[^/]+\.ndjson\.gz$/;
const MANIFEST = /^\d{4}\/\d{2}\/\d{2}\/[^/]+\.manifest\.json$/;
/** Archives written before the day layout: `YYYY-MM/<time>-<id>.ndjson.gz`, no manifest. */
const MONTH_DATA = /^\d{4}-\d{2}\/[^/]+\.ndjson\.gz$/;

/** `YYYY/MM/DD` of an ISO 8601 UTC timestamp. */
export const dayOf = (iso: string) => `${iso.slice(0, 4)}/${iso.slice(5, 7)}/${iso.slice(8, 10)}`;

/**
 * Archives one batch of notifications older than `days` out of the live log. Each day of their
 * created_at (UTC) becomes one gzipped NDJSON object, `YYYY/MM/DD/<time>-<lowest id>.ndjson.gz`,
 * then its manifest, `<same>.manifest.json`, both written before the transaction that deletes
 * the rows commits: the objects exist before the rows are gone. A crash after they were written
 * and before the commit archives the rows again into other objects: a restore keeps one copy.
 */
export async function archiveBatch(
  database: Database,
  options: { store: ArchiveStore; days: number; batchSize?: number },
): Promise<number> {
  return takeArchiveBatch(
    database,
    { days: options.days, batchSize: options.batchSize ?? ARCHIVE_BATCH },
    async (rows) => {
      const byDay = new Map<string, ArchiveLine[]>();
      for (const row of rows) {
        const day = dayOf(row.created_at);
        byDay.set(day, [...(byDay.get(day) ?? []), row]);
      }
      const time = new Date().toISOString().replace(/[:.]/g, "");
      for (const [day, dayRows] of byDay) await writeDay(options.store, day, time, dayRows);
    },
  );
}

/**
 * Writes one archive object of notifications created on `day` (`YYYY/MM/DD`), then its manifest:
 * `<day>/<time>-<lowest id>.ndjson.gz` and `.manifest.json`.
 */
export async function writeDay(store: ArchiveStore, day: string, time: string, rows: ArchiveLine[]): Promise<void> {
  const ids = rows.map((r) => r.id).sort();
  const created = rows.map((r) => r.created_at).sort();
  // PostgreSQL's json_agg puts a line break between the elements it aggregates: outside a
  // string a line break is JSON whitespace (inside one it is always escaped), so taking them out
  // leaves the same record, on one line.
  const body = await gzipAsync(rows.map((r) => `${r.line.replaceAll("\n", "")}\n`).join(""));
  const base = `${day}/${time}-${ids[0]}`;
  const manifest: ArchiveManifest = {
    format: "notify-archive",
    version: 1,
    data: `${base}.ndjson.gz`,
    records: rows.length,
    bytes: body.length,
    sha256: createHash("sha256").update(body).digest("hex"),
    first_id: ids[0] as string,
    last_id: ids.at(-1) as string,
    created_from: created[0] as string,
    created_to: created.at(-1) as string,
    written_at: new Date().toISOString(),
  };
  await store.put(manifest.data, body, "application/gzip");
  await store.put(`${base}.manifest.json`, Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`), "application/json");
}

/** Archives batch after batch until nothing is older than the window. */
export async function archiveAll(
  database: Database,
  options: { store: ArchiveStore; days: number; batchSize?: number },
): Promise<number> {
  let total = 0;
  for (;;) {
    const archived = await archiveBatch(database, options);
    total += archived;
    if (archived === 0) return total;
  }
}

/**
 * Brings a user's archived notifications back into the live log, with their channels, history,
 * attempts and fallback chains, reading every data object a manifest names (and every object of
 * the older month layout) a line at a time. An object is checked against its manifest (sha256,
 * line count) before any of its notifications is restored; one that fails stops the restore
 * with an ArchiveIntegrityError naming it. A notification already live is left alone, so a
 * restore can be repeated. Restored rows are still past the window: the next retention run
 * archives them again.
 */
export async function restoreUser(database: Database, store: ArchiveStore, userId: string): Promise<number> {
  const needle = JSON.stringify(userId);
  let restored = 0;
  for await (const source of sources(store, "", () => true)) {
    const records = await readRecords(
      store,
      source,
      (line) => line.includes(needle),
      (record) => record.notification.user_id === userId,
    );
    for (const record of records) if (await restoreArchived(database, record)) restored++;
  }
  return restored;
}

/** Whether the notification was in the archive, and whether it went back into the live log (false: it was live already). */
export interface NotificationRestore {
  found: boolean;
  restored: boolean;
}

/**
 * Brings one archived notification back into the live log. Its id is a UUIDv7, whose first 48
 * bits are the time it was made, a moment before its created_at: only the days around that time
 * are listed (the day before, the day, the day after; and their months of the older layout), and
 * of those, only objects whose manifest's id range holds the id are read. Should it not be
 * there (an id made more than a day away from its created_at, or not a UUIDv7), every other
 * manifest is read for its range, and every older-layout object. Checked like restoreUser.
 */
export async function restoreNotification(
  database: Database,
  store: ArchiveStore,
  notificationId: string,
): Promise<NotificationRestore> {
  const id = notificationId.toLowerCase();
  const inRange = (manifest: ArchiveManifest) => manifest.first_id <= id && id <= manifest.last_id;
  const nearby = candidatePrefixes(id);
  const find = async (prefix: string, skip: (key: string) => boolean): Promise<NotificationRestore | undefined> => {
    for await (const source of sources(store, prefix, inRange, skip)) {
      const [record] = await readRecords(
        store,
        source,
        (line) => line.includes(id),
        (record) => record.notification.id === id,
      );
      if (record !== undefined) return { found: true, restored: await restoreArchived(database, record) };
    }
    return undefined;
  };
  for (const prefix of nearby) {
    const found = await find(prefix, () => false);
    if (found) return found;
  }
  const done = (key: string) => nearby.some((prefix) => key.startsWith(prefix));
  return (await find("", done)) ?? { found: false, restored: false };
}

/** The day folders (and older-layout month folders) around the time a UUIDv7 names; none for another id. */
function candidatePrefixes(id: string): string[] {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)) return [];
  const ms = Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
  const days = [ms - 86_400_000, ms, ms + 86_400_000]
    .filter((t) => t >= 0 && t <= 8_640_000_000_000_000)
    .map((t) => new Date(t).toISOString());
  const prefixes = new Set<string>();
  for (const day of days) prefixes.add(`${dayOf(day)}/`);
  for (const day of days) prefixes.add(`${day.slice(0, 7)}/`);
  return [...prefixes];
}

/** A data object to read: one a manifest names (and the manifest), or one of the older month layout. */
interface Source {
  key: string;
  manifest?: { key: string; value: ArchiveManifest };
}

/** The data objects under `prefix`, in key order: those whose manifest `wanted` accepts, and every older-layout one. */
async function* sources(
  store: ArchiveStore,
  prefix: string,
  wanted: (manifest: ArchiveManifest) => boolean,
  skip: (key: string) => boolean = () => false,
): AsyncGenerator<Source> {
  for await (const key of store.list(prefix)) {
    if (skip(key)) continue;
    if (MANIFEST.test(key)) {
      const manifest = await readManifest(store, key);
      if (wanted(manifest)) yield { key: manifest.data, manifest: { key, value: manifest } };
    } else if (MONTH_DATA.test(key)) {
      yield { key };
    }
  }
}

const where = (store: ArchiveStore, key: string) => `${store.location.replace(/\/+$/, "")}/${key}`;

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function readManifest(store: ArchiveStore, key: string): Promise<ArchiveManifest> {
  const text = (await readAll(await store.get(key))).toString("utf8");
  const bad = (why: string) => new ArchiveIntegrityError(`archive manifest ${where(store, key)} ${why}`, key);
  let value: Partial<Record<keyof ArchiveManifest, unknown>>;
  try {
    value = JSON.parse(text) as typeof value;
  } catch {
    throw bad("is not JSON");
  }
  if (value === null || typeof value !== "object" || value.format !== "notify-archive") {
    throw bad("is not a notify archive manifest");
  }
  if (value.version !== 1) {
    throw bad(`has format version ${JSON.stringify(value.version)}, which this release does not read`);
  }
  const folder = key.slice(0, key.lastIndexOf("/") + 1);
  const isText = (field: unknown) => typeof field === "string" && field !== "";
  if (
    typeof value.data !== "string" ||
    !DAY_DATA.test(value.data) ||
    !value.data.startsWith(folder) ||
    !Number.isSafeInteger(value.records) ||
    (value.records as number) < 0 ||
    !Number.isSafeInteger(value.bytes) ||
    typeof value.sha256 !== "string" ||
    !/^[0-9a-f]{64}$/.test(value.sha256) ||
    !isText(value.first_id) ||
    !isText(value.last_id) ||
    !isText(value.created_from) ||
    !isText(value.created_to)
  ) {
    throw bad("is incomplete or names a data object outside its folder");
  }
  return value as ArchiveManifest;
}

/**
 * Reads one data object a line at a time, parsing only the lines `matches` lets through, and
 * answers the records `wanted` accepts once the whole object was read and, when it has a
 * manifest, found to be what the manifest says (sha256 of the gzip body, line count).
 */
async function readRecords(
  store: ArchiveStore,
  source: Source,
  matches: (line: string) => boolean,
  wanted: (record: ArchiveRecord) => boolean,
): Promise<ArchiveRecord[]> {
  const { key, manifest } = source;
  const hash = createHash("sha256");
  let bytes = 0;
  let lines = 0;
  const found: ArchiveRecord[] = [];
  const onRecord = (line: string) => {
    lines++;
    if (!matches(line)) return;
    let record: ArchiveRecord;
    try {
      record = JSON.parse(line) as ArchiveRecord;
    } catch {
      throw new Error(`line ${lines} is not JSON`);
    }
    if (wanted(record)) found.push(record);
  };
  // A record is one line that starts with `{`. A line that does not start one continues the
  // record before it: objects written before writeDay took json_agg's line breaks out hold
  // records over several lines, and the breaks are JSON whitespace, so the joined lines are the
  // record.
  let pending: string | undefined;
  const onLine = (line: string) => {
    if (line === "") return;
    if (pending !== undefined && !line.startsWith("{")) {
      pending += line;
      return;
    }
    if (pending !== undefined) onRecord(pending);
    pending = line;
  };
  try {
    await pipeline(
      await store.get(key),
      new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          hash.update(chunk);
          bytes += chunk.length;
          callback(null, chunk);
        },
      }),
      createGunzip(),
      async (text: AsyncIterable<Buffer>) => {
        const decoder = new StringDecoder("utf8");
        let rest = "";
        for await (const chunk of text) {
          rest += decoder.write(chunk);
          let start = 0;
          for (let end = rest.indexOf("\n"); end !== -1; end = rest.indexOf("\n", start)) {
            onLine(rest.slice(start, end));
            start = end + 1;
          }
          rest = rest.slice(start);
        }
        onLine(rest + decoder.end());
        if (pending !== undefined) onRecord(pending);
      },
    );
  } catch (error) {
    if (error instanceof ArchiveIntegrityError) throw error;
    // A body cut short or changed often fails to inflate before its end: say whether it matches
    // its manifest, the likelier story, rather than what zlib made of it.
    if (manifest !== undefined) {
      const actual = createHash("sha256")
        .update(await readAll(await store.get(key)))
        .digest("hex");
      if (actual !== manifest.value.sha256) throw mismatch(store, key, manifest, actual, error);
    }
    const message = error instanceof Error ? error.message : String(error);
    throw new ArchiveIntegrityError(`archive object ${where(store, key)} cannot be read: ${message}`, key, {
      cause: error,
    });
  }
  if (manifest !== undefined) {
    const actual = hash.digest("hex");
    if (actual !== manifest.value.sha256 || bytes !== manifest.value.bytes) {
      throw mismatch(store, key, manifest, actual);
    }
    if (lines !== manifest.value.records) {
      throw new ArchiveIntegrityError(
        `archive object ${where(store, key)} holds ${lines} notifications, its manifest ${manifest.key} says ${manifest.value.records}; none of it was restored`,
        key,
      );
    }
  }
  return found;
}

const mismatch = (
  store: ArchiveStore,
  key: string,
  manifest: { key: string; value: ArchiveManifest },
  actual: string,
  cause?: unknown,
) =>
  new ArchiveIntegrityError(
    `archive object ${where(store, key)} does not match its manifest ${manifest.key}: sha256 ${actual}, the manifest says ${manifest.value.sha256}; none of it was restored`,
    key,
    cause === undefined ? undefined : { cause },
  );
