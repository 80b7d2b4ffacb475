import { hashKey, type Scope } from "@notify/core";
import { type Database, findActiveKeyByHash, touchKeyLastUsed } from "@notify/db";
import type { Logger } from "@notify/log";

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
 * within `ttlMs`. Unknown keys are cached too, so a flood of bad keys does not reach Postgres.
 * A key whose `revoked_at` lies ahead is in a rotation grace period and still authenticates.
 */
export function createKeyLookup(database: Database, ttlMs: number, log?: Logger) {
  const cache = new Map<string, { principal: Principal | null; expires: number }>();
  const touched = new Map<string, number>();

  // Off the request path: a slow or failed write never delays or fails a request.
  const touch = (keyId: string, now: number) => {
    if (now - (touched.get(keyId) ?? Number.NEGATIVE_INFINITY) < TOUCH_INTERVAL_MS) return;
    if (touched.size > MAX_ENTRIES) touched.clear();
    touched.set(keyId, now);
    touchKeyLastUsed(database, keyId).catch((error: unknown) =>
      log?.debug({ err: error, key_id: keyId }, "could not record API key use"),
    );
  };

  return async (key: string): Promise<Principal | null> => {
    const hash = hashKey(key);
    const now = Date.now();
    let principal: Principal | null;
    const hit = cache.get(hash);
    if (hit && hit.expires > now) {
      principal = hit.principal;
    } else {
      const row = await findActiveKeyByHash(database, hash);
      principal = row
        ? {
            keyId: row.id,
            clientId: row.client_id,
            scopes: row.scopes,
            rateLimit:
              row.rate_limit_burst !== null && row.rate_limit_per_second !== null
                ? { burst: row.rate_limit_burst, perSecond: row.rate_limit_per_second }
                : null,
          }
        : null;
      if (cache.size > MAX_ENTRIES) cache.clear();
      // A grace period ends on time, not up to a cache lifetime later.
      const expires = Math.min(now + ttlMs, row?.revoked_at?.getTime() ?? Number.POSITIVE_INFINITY);
      if (expires > now) cache.set(hash, { principal, expires });
    }
    if (principal) touch(principal.keyId, now);
    return principal;
  };
}
