import type { Scope } from "@notify/core";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { apiKeys } from "../schema/index.js";

// The lookups behind every API request: a key that authenticates now, by the database clock,
// and the record of its use.

/** An API key that authenticates now: never revoked, or in a rotation grace period. */
export type ActiveApiKey = Omit<
  RowPick<typeof apiKeys, "id" | "client_id" | "scopes" | "revoked_at" | "rate_limit_burst" | "rate_limit_per_second">,
  "scopes"
> & { scopes: Scope[] };

/** The key with this SHA-256, if it authenticates now (by the database clock); null otherwise. */
export async function findActiveKeyByHash(database: Database, keyHash: string): Promise<ActiveApiKey | null> {
  const [row] = await database.sql<ActiveApiKey[]>`
    select id, client_id, scopes, revoked_at, rate_limit_burst, rate_limit_per_second from api_keys
    where key_hash = ${keyHash} and (revoked_at is null or revoked_at > now())`;
  return row ?? null;
}

/** A key that authenticates now, by id: what a token minted by it needs to know of it. */
export async function findActiveKeyById(database: Database, id: string): Promise<ActiveApiKey | null> {
  const [row] = await database.sql<ActiveApiKey[]>`
    select id, client_id, scopes, revoked_at, rate_limit_burst, rate_limit_per_second from api_keys
    where id = ${id} and (revoked_at is null or revoked_at > now())`;
  return row ?? null;
}

/**
 * Every key that authenticates now: its id, the SHA-256 of the key and when a grace period
 * ends. What each ingest instance holds in memory to tell a valid key from a random one
 * without a lookup (a few dozen bytes a key).
 */
export async function listActiveKeyHashes(
  database: Database,
): Promise<{ id: string; key_hash: string; revoked_at: Date | null }[]> {
  return database.sql<{ id: string; key_hash: string; revoked_at: Date | null }[]>`
    select id, key_hash, revoked_at from api_keys where revoked_at is null or revoked_at > now()`;
}

/** The SHA-256 of one key and whether it authenticates now; null when no key has this id. */
export async function findKeyHash(
  database: Database,
  id: string,
): Promise<{ key_hash: string; active: boolean; revoked_at: Date | null } | null> {
  const [row] = await database.sql<{ key_hash: string; active: boolean; revoked_at: Date | null }[]>`
    select key_hash, revoked_at, (revoked_at is null or revoked_at > now()) as active from api_keys where id = ${id}`;
  return row ?? null;
}

/** Records that the key was used now (last_used_at tells operators which keys are unused). */
export async function touchKeyLastUsed(database: Database, keyId: string): Promise<void> {
  await database.sql`update api_keys set last_used_at = now() where id = ${keyId}`;
}
