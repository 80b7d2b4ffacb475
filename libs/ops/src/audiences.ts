import { createReadStream } from "node:fs";
import { type MemberFormat, memberBatches, newId } from "@notify/core";
import {
  type AudienceRecord,
  createAudience,
  type Database,
  getAudience,
  type ImportResult,
  importAudienceMembers,
} from "@notify/db";

/** A new, empty audience under a fresh id. */
export const createEmptyAudience = (database: Database, name: string): Promise<AudienceRecord> =>
  createAudience(database, newId(), name);

/** An audience; fails for an unknown id. */
export async function findAudience(database: Database, id: string): Promise<AudienceRecord> {
  const audience = await getAudience(database, id);
  if (!audience) throw new Error(`no audience ${id}`);
  return audience;
}

/**
 * Streams a file of members into an audience: one batch in memory, all or nothing (libs/db
 * directory/audiences.ts). `onRead` hears the running count of members read. Null for an unknown
 * audience.
 */
export async function importMembersFromFile(
  database: Database,
  id: string,
  file: string,
  format: MemberFormat,
  onRead?: (read: number) => void,
): Promise<({ audience_id: string } & ImportResult & { member_count: number }) | null> {
  let read = 0;
  async function* progress() {
    for await (const batch of memberBatches(createReadStream(file), format)) {
      read += batch.length;
      onRead?.(read);
      yield batch;
    }
  }
  const result = await importAudienceMembers(database, id, progress());
  if (!result) return null;
  const audience = await getAudience(database, id);
  return { audience_id: id, ...result, member_count: audience?.member_count ?? 0 };
}
