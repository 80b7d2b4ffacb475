import { unnestColumns } from "../batch.js";
import type { Database } from "../pool.js";
import type { SuppressibleChannel, SuppressionReason, SuppressionSource } from "../schema/index.js";

/**
 * The suppression list's entries: added (the first entry for a channel, address and client is
 * kept), removed, and read for the (channel, address) pairs a send is about to use. Addresses
 * arrive normalised (`suppressionAddress` of @notify/core); these statements compare them as
 * given. A `client_id` of '' is an entry that holds for every client.
 */

export interface SuppressionEntry {
  channel: SuppressibleChannel;
  address: string;
  /** '' for an entry that holds for every client. */
  client_id: string;
  reason: SuppressionReason;
  source: SuppressionSource;
  created_at: Date;
}

export type NewSuppression = Omit<SuppressionEntry, "created_at">;

export const ENTRY_COLUMNS = "channel, address, client_id, reason, source, created_at";

/**
 * Adds the entries in one statement; an entry whose (channel, address, client) is on the list
 * already is left as it is, so the first reason and source stay. Answers how many were added.
 */
export async function addSuppressions(database: Database, entries: readonly NewSuppression[]): Promise<number> {
  if (entries.length === 0) return 0;
  const { sql } = database;
  const rows = await sql`
    insert into suppressions (channel, address, client_id, reason, source)
    select e.channel, e.address, e.client_id, e.reason, e.source::jsonb
    from ${unnestColumns(sql, "e", {
      channel: ["text", entries.map((e) => e.channel)],
      address: ["text", entries.map((e) => e.address)],
      client_id: ["text", entries.map((e) => e.client_id)],
      reason: ["text", entries.map((e) => e.reason)],
      source: ["text", entries.map((e) => JSON.stringify(e.source))],
    })}
    on conflict (channel, address, client_id) do nothing
    returning 1`;
  return rows.length;
}

/**
 * Adds one entry unless its (channel, address, client) is on the list already, and answers the
 * entry as it stands (the first one's reason and source) and whether this call added it, in one
 * statement: the conflict's no-op update returns the row a concurrent writer committed, which a
 * separate read could miss or find removed.
 */
export async function putSuppression(
  database: Database,
  entry: NewSuppression,
): Promise<{ entry: SuppressionEntry; added: boolean }> {
  const { sql } = database;
  const [row] = await sql<Array<SuppressionEntry & { added: boolean }>>`
    insert into suppressions (channel, address, client_id, reason, source)
    values (${entry.channel}, ${entry.address}, ${entry.client_id}, ${entry.reason}, ${sql.json(entry.source as never)})
    on conflict (channel, address, client_id) do update set reason = suppressions.reason
    returning ${sql.unsafe(ENTRY_COLUMNS)}, (xmax = 0) as added`;
  if (row === undefined) throw new Error("an upsert returned no row");
  const { added, ...stored } = row;
  return { entry: stored, added };
}

/** Removes one entry; false when there was none. */
export async function removeSuppression(
  database: Database,
  channel: string,
  address: string,
  clientId: string,
): Promise<boolean> {
  const rows = await database.sql`
    delete from suppressions where channel = ${channel} and address = ${address} and client_id = ${clientId}
    returning 1`;
  return rows.length > 0;
}

/**
 * The entries that hold for `clientId` (its own and every client's) for any of the (channel,
 * address) pairs, in one statement whatever their number; ordered by channel, address, client.
 */
export async function suppressionsOf(
  database: Database,
  clientId: string,
  items: ReadonlyArray<{ channel: string; address: string }>,
): Promise<SuppressionEntry[]> {
  if (items.length === 0) return [];
  const { sql } = database;
  return sql<SuppressionEntry[]>`
    select ${sql.unsafe(ENTRY_COLUMNS)} from suppressions
    where client_id in (${clientId}, '')
      and (channel, address) in (select p.channel, p.address from ${unnestColumns(sql, "p", {
        channel: ["text", items.map((i) => i.channel)],
        address: ["text", items.map((i) => i.address)],
      })})
    order by channel, address, client_id`;
}
