import type { Database } from "../pool.js";

// The revocations of signed inbox tokens, which every ingest instance holds in memory: stored
// within each client's cap, read since a time, purged once their tokens have expired.

/**
 * A revocation of inbox tokens: one token of the user from the client (`tokenId`), or, with
 * `tokenId` null, every one of them issued up to `revokedAt`.
 */
export interface InboxTokenRevocation {
  clientId: string;
  userId: string;
  tokenId: string | null;
  revokedAt: Date;
}

/** What storing a revocation did: added a row, found one (moved forward for a user's), or met the client's cap. */
export type RevocationStored = "added" | "known" | "full";

/** Thrown inside the transaction to undo a row the client's cap has no room for. */
class CapReached extends Error {}

/**
 * Records a revocation, kept until `expiresAt` (when the last token it covers has expired): one
 * row per token, and one per user of a client, whose `revoked_at` and `expires_at` only move
 * forward. A row it adds takes one of the client's `perClient` (inbox_token_revocation_counts;
 * the row lock on the client's count serialises them): with none left nothing is stored
 * ("full"). Revoking all of a user's tokens also deletes the user's opaque tokens of that client
 * (all minted before now: none is minted any more), which are looked up rather than checked
 * against the revocations. One transaction.
 */
export async function insertInboxTokenRevocation(
  database: Database,
  revocation: InboxTokenRevocation & { expiresAt: Date },
  perClient: number,
): Promise<RevocationStored> {
  const { clientId, userId, tokenId, revokedAt, expiresAt } = revocation;
  try {
    return await database.sql.begin(async (sql) => {
      const rows =
        tokenId === null
          ? await sql<{ added: boolean }[]>`
              insert into inbox_token_revocations (client_id, user_id, token_id, revoked_at, expires_at)
              values (${clientId}, ${userId}, null, ${revokedAt}, ${expiresAt})
              on conflict (client_id, user_id) where token_id is null do update set
                revoked_at = greatest(inbox_token_revocations.revoked_at, excluded.revoked_at),
                expires_at = greatest(inbox_token_revocations.expires_at, excluded.expires_at)
              returning xmax = 0 as added`
          : await sql<{ added: boolean }[]>`
              insert into inbox_token_revocations (client_id, user_id, token_id, revoked_at, expires_at)
              values (${clientId}, ${userId}, ${tokenId}, ${revokedAt}, ${expiresAt})
              on conflict (client_id, user_id, token_id) where token_id is not null do nothing
              returning true as added`;
      const added = rows[0]?.added === true;
      if (added) {
        const taken = await sql`
          insert into inbox_token_revocation_counts (client_id, held) values (${clientId}, 1)
          on conflict (client_id) do update set held = inbox_token_revocation_counts.held + 1
            where inbox_token_revocation_counts.held < ${perClient}
          returning held`;
        if (taken.length === 0 || perClient < 1) throw new CapReached();
      }
      if (tokenId === null) await sql`delete from inbox_tokens where client_id = ${clientId} and user_id = ${userId}`;
      return added ? "added" : "known";
    });
  } catch (error) {
    if (error instanceof CapReached) return "full";
    throw error;
  }
}

/** How many revocation rows a client holds (what its cap counts). */
export async function countInboxTokenRevocations(database: Database, clientId: string): Promise<number> {
  const [row] = await database.sql<{ held: number }[]>`
    select held from inbox_token_revocation_counts where client_id = ${clientId}`;
  return row?.held ?? 0;
}

/**
 * The revocations still in force (their tokens may not all have expired); with `since`, only
 * those revoked after it, for a reader that holds the earlier ones.
 */
export async function listInboxTokenRevocations(
  database: Database,
  since: Date | null = null,
): Promise<(InboxTokenRevocation & { expiresAt: Date })[]> {
  const { sql } = database;
  const rows = await sql<
    { client_id: string; user_id: string; token_id: string | null; revoked_at: Date; expires_at: Date }[]
  >`
    select client_id, user_id, token_id, revoked_at, expires_at from inbox_token_revocations
    where expires_at > now() ${since === null ? sql`` : sql`and revoked_at > ${since}`}`;
  return rows.map((row) => ({
    clientId: row.client_id,
    userId: row.user_id,
    tokenId: row.token_id,
    revokedAt: row.revoked_at,
    expiresAt: row.expires_at,
  }));
}

/**
 * Deletes revocations whose tokens have all expired and gives their clients the rows back (in
 * the same statement); answers how many.
 */
export async function purgeExpiredInboxTokenRevocations(database: Database): Promise<number> {
  const [row] = await database.sql<{ purged: number }[]>`
    with purged as (
      delete from inbox_token_revocations where expires_at < now() returning client_id
    ), freed as (
      update inbox_token_revocation_counts c set held = greatest(c.held - p.rows, 0)
      from (select client_id, count(*)::int as rows from purged group by client_id) p
      where c.client_id = p.client_id
    )
    select count(*)::int as purged from purged`;
  return row?.purged ?? 0;
}
