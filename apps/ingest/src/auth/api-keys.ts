import { hashKey, type Scope } from "@notify/core";
import { type Database, findActiveKeyByHash, touchKeyLastUsed } from "@notify/db";
import type { AttemptBudget } from "@notify/http";
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
/** Unknown keys remembered: enough to absorb a client retrying a few bad keys, small by design. */
const MAX_UNKNOWN = 2_000;

/**
 * Looks a presented key up; with `budget` (the source address's pre-auth attempts, see
 * createAttemptThrottle) a key the cache does not know to be valid first checks the address
 * still has attempts, and a lookup that goes to Postgres holds one of them while it runs, so
 * one address cannot have more than its burst of lookups in flight.
 */
export type KeyLookup = (key: string, budget?: AttemptBudget) => Promise<Principal | null>;

/**
 * Looks a presented key up by hash, with a short cache: revocation reaches every process
 * within `ttlMs`. Unknown keys are cached too, so a flood of bad keys does not reach Postgres,
 * in a cache of their own: however many random keys arrive, they never evict a valid one.
 * Both are bounded LRUs. Concurrent lookups of one key share one query, so a key is looked up
 * in Postgres at most once per `ttlMs` however many requests present it. A key whose
 * `revoked_at` lies ahead is in a rotation grace period and still authenticates.
 */
export function createKeyLookup(database: Database, ttlMs: number, log?: Logger): KeyLookup {
  // lru-cache reads a ttl of 0 as "forever"; here it means no cache.
  const cached = ttlMs > 0;
  const known = new LRUCache<string, Principal>({ max: MAX_ENTRIES, ttl: Math.max(1, ttlMs) });
  const unknown = new LRUCache<string, true>({ max: MAX_UNKNOWN, ttl: Math.max(1, ttlMs) });
  const inFlight = new Map<string, Promise<Principal | null>>();
  const touched = new LRUCache<string, true>({ max: MAX_ENTRIES, ttl: TOUCH_INTERVAL_MS });

  // Off the request path: a slow or failed write never delays or fails a request.
  const touch = (keyId: string) => {
    if (touched.has(keyId)) return;
    touched.set(keyId, true);
    touchKeyLastUsed(database, keyId).catch((error: unknown) =>
      log?.debug({ err: error, key_id: keyId }, "could not record API key use"),
    );
  };

  const query = async (hash: string): Promise<Principal | null> => {
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

  const lookup = async (hash: string, budget?: AttemptBudget): Promise<Principal | null> => {
    const hit = cached ? known.get(hash) : undefined;
    if (hit !== undefined) return hit;
    // Only a key known to be valid skips the address's budget.
    budget?.check();
    if (cached && unknown.has(hash)) return null;
    const running = inFlight.get(hash);
    if (running) return running;
    budget?.charge();
    const started = query(hash).finally(() => {
      inFlight.delete(hash);
      budget?.refund();
    });
    inFlight.set(hash, started);
    return started;
  };

  return async (key, budget) => {
    const principal = await lookup(hashKey(key), budget);
    if (principal) touch(principal.keyId);
    return principal;
  };
}
