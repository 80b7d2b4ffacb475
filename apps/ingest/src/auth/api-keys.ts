import { andThen, hashKey, type MaybePromise, type Scope } from "@notify/core";
import { type Database, findActiveKeyByHash, touchKeyLastUsed } from "@notify/db";
import { type AttemptBudget, createForgettableCache } from "@notify/http";
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
 * one address cannot have more than its burst of lookups in flight. A key cached as valid is
 * answered as a plain value; anything else is a promise, and every failure a rejection.
 */
export type KeyLookup = (key: string, budget?: AttemptBudget) => MaybePromise<Principal | null>;

/** A KeyLookup with a cache, which a revocation announced on NATS empties of the key at once. */
export type CachedKeyLookup = KeyLookup & { forget(keyId: string): void };

/**
 * Looks a presented key up by hash, with a short cache: a revocation reaches every process at
 * once through `forget` (ingest calls it for each key change announced on NATS), and within
 * `ttlMs` where an announcement was missed. Unknown keys are cached too, so a flood of bad keys does not reach Postgres,
 * in a cache of their own: however many random keys arrive, they never evict a valid one.
 * Both are bounded LRUs. Concurrent lookups of one key share one query, so a key is looked up
 * in Postgres at most once per `ttlMs` however many requests present it. A key whose
 * `revoked_at` lies ahead is in a rotation grace period and still authenticates.
 */
export function createKeyLookup(database: Database, ttlMs: number, log?: Logger): CachedKeyLookup {
  // A ttl of 0 means no cache (lru-cache would read it as "forever").
  const cached = ttlMs > 0;
  // By hash; a revocation announced on NATS forgets every hash of its key id.
  const known = createForgettableCache<Principal | null>({
    max: MAX_ENTRIES,
    ttlMs,
    tagOf: (hash, principal) => principal?.keyId ?? hash,
  });
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

  const query = (hash: string): Promise<Principal | null> => {
    // A grace period ends on time, not up to a cache lifetime later.
    let until = Number.POSITIVE_INFINITY;
    return known.load(
      hash,
      async () => {
        const row = await findActiveKeyByHash(database, hash);
        if (!row) {
          if (cached) unknown.set(hash, true);
          return null;
        }
        until = row.revoked_at?.getTime() ?? until;
        return {
          keyId: row.id,
          clientId: row.client_id,
          scopes: row.scopes,
          rateLimit:
            row.rate_limit_burst !== null && row.rate_limit_per_second !== null
              ? { burst: row.rate_limit_burst, perSecond: row.rate_limit_per_second }
              : null,
        };
      },
      // Unknown keys are kept in a cache of their own, where they cannot evict a valid one.
      (principal) => (principal === null ? 0 : until - Date.now()),
    );
  };

  // A cached valid key is answered at once (no promise): this runs on every request.
  const lookup = (hash: string, budget?: AttemptBudget): MaybePromise<Principal | null> => {
    const hit = known.get(hash);
    if (hit) return hit;
    // Only a key known to be valid skips the address's budget. Past the hit, failures are
    // rejections, as callers await what they get.
    try {
      budget?.check();
    } catch (error) {
      return Promise.reject(error);
    }
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

  const keyLookup: KeyLookup = (key, budget) =>
    andThen(lookup(hashKey(key), budget), (principal) => {
      if (principal) touch(principal.keyId);
      return principal;
    });
  return Object.assign(keyLookup, { forget: (keyId: string) => known.forget(keyId) });
}
