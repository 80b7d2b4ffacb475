import {
  type ArchiveLine,
  type Database,
  detachedLines,
  detachedPartitions,
  detachPartition,
  dropDetached,
  partitionsPastRetention,
} from "@notify/db";
import type { ArchiveStore } from "./archive-store.js";
import { dayOf, writeDay } from "./retention.js";

/** Notifications per read of a detached partition (and at most per archive object). */
export const PARTITION_ARCHIVE_CHUNK = 5000;

export interface RetiredPartitions {
  /** Partitions archived and dropped. */
  partitions: number;
  /** Notifications archived from them. */
  archived: number;
  /** Notifications that still had work to do, moved to the default partition instead. */
  kept: number;
}

/**
 * Retires the log's partitions wholly older than `days` (before `asOf`, the database's clock by
 * default), oldest first: each is detached from the
 * live log (its notifications with work still to do stay, in the default partition), archived a
 * chunk at a time into the store (the same objects and manifests as the row-by-row archive), then
 * dropped. The drop comes after the last object is written; a crash between the two leaves the
 * detached tables for the next run, which archives them again from the start (a restore keeps one
 * copy) and drops them. No row is deleted one by one.
 */
export async function retirePartitions(
  database: Database,
  options: { store: ArchiveStore; days: number; chunk?: number; asOf?: Date },
): Promise<RetiredPartitions> {
  let kept = 0;
  for (const partition of await partitionsPastRetention(database, options.days, options.asOf)) {
    kept += await detachPartition(database, partition.suffix);
  }
  let partitions = 0;
  let archived = 0;
  for (const suffix of await detachedPartitions(database)) {
    archived += await archiveDetached(database, options.store, suffix, options.chunk ?? PARTITION_ARCHIVE_CHUNK);
    await dropDetached(database, suffix);
    partitions++;
  }
  return { partitions, archived, kept };
}

async function archiveDetached(
  database: Database,
  store: ArchiveStore,
  suffix: string,
  chunk: number,
): Promise<number> {
  const time = new Date().toISOString().replace(/[:.]/g, "");
  let after = "";
  let total = 0;
  for (;;) {
    const rows = await detachedLines(database, suffix, after, chunk);
    if (rows.length === 0) return total;
    const byDay = new Map<string, ArchiveLine[]>();
    for (const row of rows) {
      const day = dayOf(row.created_at);
      const list = byDay.get(day);
      if (list) list.push(row);
      else byDay.set(day, [row]);
    }
    for (const [day, dayRows] of byDay) await writeDay(store, day, time, dayRows);
    total += rows.length;
    after = rows.at(-1)?.id ?? after;
  }
}
