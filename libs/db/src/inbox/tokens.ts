import type { Database } from "../pool.js";

// The inbox's opaque tokens, which carry no signature (the API mints signed ones, libs/core
// credentials.ts): stored as their SHA-256, looked up, and purged once expired.

/**
 * Whose inbox a token opens: one user's items from one client (the client whose key minted the
 * token). Every inbox query is confined to both.
 */
export interface InboxOwner {
  userId: string;
  clientId: string;
}

/**
 * Stores an opaque token's SHA-256 for the user, minted by `keyId` of `clientId`, valid until
 * `expiresAt`. The API mints signed tokens instead (libs/core credentials.ts); an opaque token
 * works until it expires.
 */
export async function insertInboxToken(
  database: Database,
  token: { tokenHash: string; userId: string; clientId: string; keyId: string; expiresAt: Date },
): Promise<void> {
  await database.sql`insert into inbox_tokens (token_hash, user_id, client_id, key_id, expires_at)
    values (${token.tokenHash}, ${token.userId}, ${token.clientId}, ${token.keyId}, ${token.expiresAt})`;
}

/** What an opaque token opens, and what a stream of it re-checks: its key, its issue and its expiry. */
export interface StoredInboxToken extends InboxOwner {
  keyId: string;
  createdAt: Date;
  expiresAt: Date;
}

/**
 * The opaque token with this SHA-256, unexpired, while the key that minted it still works (not
 * revoked, or within a rotation's grace); null otherwise.
 */
export async function findInboxTokenOwner(database: Database, tokenHash: string): Promise<StoredInboxToken | null> {
  const [row] = await database.sql<
    { user_id: string; client_id: string; key_id: string; created_at: Date; expires_at: Date }[]
  >`
    select t.user_id, t.client_id, t.key_id, t.created_at, t.expires_at from inbox_tokens t
    join api_keys k on k.id = t.key_id and k.client_id = t.client_id
    where t.token_hash = ${tokenHash} and t.expires_at > now()
      and (k.revoked_at is null or k.revoked_at > now())`;
  return row === undefined
    ? null
    : {
        userId: row.user_id,
        clientId: row.client_id,
        keyId: row.key_id,
        createdAt: row.created_at,
        expiresAt: row.expires_at,
      };
}

/** Deletes tokens that expired more than `graceMs` ago (they no longer open anything); answers how many. */
export async function purgeExpiredInboxTokens(database: Database, graceMs = 0): Promise<number> {
  const rows = await database.sql`
    delete from inbox_tokens where expires_at < now() - ${`${graceMs} milliseconds`}::interval returning 1`;
  return rows.length;
}
