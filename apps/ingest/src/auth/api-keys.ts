import { hashKey, type Scope } from "@notify/core";
import { type Database, findActiveKeyByHash, touchKeyLastUsed } from "@notify/db";
import type { Logger } from "@notify/log";
import { LRUCache } from "lru-cache";

export interface Principal {
  keyId: string;
  clientId: string;
  scopes: Scope[];
  /** This key's own inbound limit; null means the service default. */
  rateLimit: { burst: number; perSecond: number } | null;
}

/** The admin scope includes every other scope. */
export const hasScope = (principal: Principal, scope: Scope) =>
  principal.scopes.includes(scope) || principal.scopes.includes("admin");

/** last_used_at tells operators which keys are unused; a minute's precision is plenty. */
const TOUCH_INTERVAL_MS = 60_000;
const MAX_ENTRIES = 10_000;

/**
 * Looks a presented key up by hash, with a short cache: revocation reaches every process
 * within `ttlMs`. Unknown keys are cached too, so a flood of bad keys does not reach Postgres,
 * in a cache of their own: however many random keys arrive, they never evict a valid one.
 * Both are bounded LRUs. A key whose `revoked_at` lies ahead is in a rotation grace period and
 * still authenticates.
 */
export function createKeyLookup(database: Database, ttlMs: number, log?: Logger) {
  // lru-cache reads a ttl of 0 as "forever"; here it means no cache.
  const cached = ttlMs > 0;
  const known = new LRUCache<string, Principal>({ max: MAX_ENTRIES, ttl: Math.max(1, ttlMs) });
  const unknown = new LRUCache<string, true>({ max: MAX_ENTRIES, ttl: Math.max(1, ttlMs) });
  const touched = new LRUCache<string, true>({ max: MAX_ENTRIES, ttl: TOUCH_INTERVAL_MS });

  // Off the request path: a slow or failed write never delays or fails a request.
  const touch = (keyId: string) => {
    if (touched.has(keyId)) return;
    touched.set(keyId, true);
    touchKeyLastUsed(database, keyId).catch((error: unknown) =>
      log?.debug({ err: error, key_id: keyId }, "could not record API key use"),
    );
  };

  const lookup = async (hash: string): Promise<Principal | null> => {
    const hit = cached ? known.get(hash) : undefined;
    if (hit !== undefined) return hit;
    if (cached && unknown.has(hash)) return null;
    const row = await findActiveKeyByHash(database, hash);
    if (!row) {
      if (cached) unknown.set(hash, true);
      return null;
    }
    const principal: Principal = {
      keyId: row.id,
      clientId: row.client_id,
      scopes: row.scopes,
      rateLimit:
        row.rate_limit_burst !== null && row.rate_limit_per_second !== null
          ? { burst: row.rate_limit_burst, perSecond: row.rate_limit_per_second }
          : null,
    };
    // A grace period ends on time, not up to a cache lifetime later.
    const ttl = Math.min(ttlMs, (row.revoked_at?.getTime() ?? Number.POSITIVE_INFINITY) - Date.now());
    if (cached && ttl >= 1) known.set(hash, principal, { ttl });
    return principal;
  };

  return async (key: string): Promise<Principal | null> => {
    const principal = await lookup(hashKey(key));
    if (principal) touch(principal.keyId);
    return principal;
  };
}
