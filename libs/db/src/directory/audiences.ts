import type { Database } from "../pool.js";

export interface AudienceRecord {
  id: string;
  name: string;
  member_count: number;
  created_at: string;
  updated_at: string;
}

export interface ImportResult {
  /** Member lines read. */
  received: number;
  /** Of them, members the audience did not have yet. */
  added: number;
}

/**
 * Stores streamed member batches in one transaction, one `unnest` insert per batch: an import
 * that fails on a bad line or a lost connection leaves the audience as it was, and memory holds
 * one batch however many members arrive. Null when there is no such audience.
 */
export async function importAudienceMembers(
  database: Database,
  audienceId: string,
  batches: AsyncIterable<string[]>,
): Promise<ImportResult | null> {
  return database.sql.begin(async (tx) => {
    const [audience] = await tx`select id from audiences where id = ${audienceId} for update`;
    if (!audience) return null;
    let received = 0;
    let added = 0;
    for await (const batch of batches) {
      received += batch.length;
      const result = await tx`insert into audience_members (audience_id, user_id)
        select ${audienceId}, u from unnest(${batch}::text[]) as u on conflict do nothing`;
      added += result.count;
    }
    await tx`update audiences set updated_at = now() where id = ${audienceId}`;
    return { received, added };
  });
}

export async function getAudience(database: Database, id: string): Promise<AudienceRecord | null> {
  const [row] = await database.sql<AudienceRecord[]>`
    select a.id, a.name, a.member_count::float8 as member_count,
           a.created_at, a.updated_at
    from audiences a where a.id = ${id}`;
  return row ? normalize(row) : null;
}

const normalize = (row: AudienceRecord): AudienceRecord => ({
  ...row,
  member_count: Number(row.member_count),
  created_at: new Date(row.created_at).toISOString(),
  updated_at: new Date(row.updated_at).toISOString(),
});

export async function createAudience(database: Database, id: string, name: string): Promise<AudienceRecord> {
  const [row] = await database.sql<AudienceRecord[]>`
    insert into audiences (id, name) values (${id}, ${name})
    returning id, name, 0 as member_count, created_at, updated_at`;
  return normalize(row as AudienceRecord);
}

export async function listAudiences(
  database: Database,
  page: number,
  pageSize: number,
): Promise<{ data: AudienceRecord[]; total: number }> {
  const rows = await database.sql<AudienceRecord[]>`
    select a.id, a.name, a.member_count::float8 as member_count,
           a.created_at, a.updated_at
    from audiences a order by a.created_at desc, a.id limit ${pageSize} offset ${(page - 1) * pageSize}`;
  const [count] = await database.sql<{ total: number }[]>`select count(*)::float8 as total from audiences`;
  return { data: rows.map(normalize), total: Number(count?.total ?? 0) };
}

/** Adds (true) or removes (false) one member; false when the audience does not exist. */
export async function setAudienceMember(
  database: Database,
  audienceId: string,
  userId: string,
  member: boolean,
): Promise<boolean> {
  return database.sql.begin(async (tx) => {
    const [audience] = await tx`update audiences set updated_at = now() where id = ${audienceId} returning id`;
    if (!audience) return false;
    if (member) {
      await tx`insert into audience_members (audience_id, user_id) values (${audienceId}, ${userId}) on conflict do nothing`;
    } else {
      await tx`delete from audience_members where audience_id = ${audienceId} and user_id = ${userId}`;
    }
    return true;
  });
}
