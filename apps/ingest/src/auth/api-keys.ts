import { generateKey, hashKey, keyDisplayPrefix, newId, type Scope } from "@notify/core";
import { apiKeys, type Database } from "@notify/db";
import { eq } from "drizzle-orm";

export interface Principal {
  keyId: string;
  clientId: string;
  scopes: Scope[];
}

/** The admin scope includes every other scope. */
export const hasScope = (principal: Principal, scope: Scope) =>
  principal.scopes.includes(scope) || principal.scopes.includes("admin");

/** Issues a key: stores its hash only and returns the plaintext once. */
export async function createApiKey(
  database: Database,
  input: { clientId: string; name: string; scopes: Scope[] },
): Promise<{ id: string; key: string; prefix: string }> {
  const key = generateKey();
  const id = newId();
  const prefix = keyDisplayPrefix(key);
  await database.db
    .insert(apiKeys)
    .values({ id, clientId: input.clientId, name: input.name, prefix, keyHash: hashKey(key), scopes: input.scopes });
  return { id, key, prefix };
}

/**
 * Looks a presented key up by hash, with a short cache: revocation reaches every process
 * within `ttlMs`. Unknown keys are cached too, so a flood of bad keys does not reach Postgres.
 */
export function createKeyLookup(database: Database, ttlMs: number) {
  const cache = new Map<string, { principal: Principal | null; expires: number }>();
  return async (key: string): Promise<Principal | null> => {
    const hash = hashKey(key);
    const now = Date.now();
    const hit = cache.get(hash);
    if (hit && hit.expires > now) return hit.principal;
    const [row] = await database.db.select().from(apiKeys).where(eq(apiKeys.keyHash, hash)).limit(1);
    const principal =
      row && row.revokedAt === null ? { keyId: row.id, clientId: row.clientId, scopes: row.scopes as Scope[] } : null;
    if (cache.size > 10_000) cache.clear();
    if (ttlMs > 0) cache.set(hash, { principal, expires: now + ttlMs });
    return principal;
  };
}
