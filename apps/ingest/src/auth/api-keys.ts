import {
  andThen,
  type CredentialKeys,
  hashKey,
  keyForm,
  type MaybePromise,
  type Scope,
  scopesInclude,
} from "@notify/core";
import {
  type Database,
  findActiveKeyByHash,
  findActiveKeyById,
  findKeyHash,
  listActiveKeyHashes,
  loadCredentialKeys,
  touchKeyLastUsed,
} from "@notify/db";
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

/** Whether the key holds `scope`, itself or through a scope that includes it (libs/core SCOPES). */
export const hasScope = (principal: Principal, scope: Scope) => scopesInclude(principal.scopes, scope);

/** last_used_at tells operators which keys are unused; a minute's precision is plenty. */
const TOUCH_INTERVAL_MS = 60_000;
const MAX_ENTRIES = 10_000;
/** Unknown keys remembered: enough to absorb a client retrying a few bad keys, small by design. */
const MAX_UNKNOWN = 2_000;

/**
 * Looks a presented key up. A key that can be told valid or not without Postgres never touches
 * `budget` (the source address's pre-auth attempts, see createAttemptThrottle): a key cached as
 * valid, a signed key (its MAC decides in microseconds whether this deployment minted it; a
 * forged one spends an attempt and is refused without a lookup), and an unsigned key whose
 * hash is among the active keys held in memory. Only an unsigned key none of these knows is
 * looked up against the budget, reserved before the lookup and given back if the key is valid,
 * so one address never has more than its burst of such lookups in flight and a valid key is
 * never refused for others' failures. A key cached as valid, a forged one and one cached as
 * unknown are answered as plain values; anything else is a promise, and every failure a
 * rejection.
 */
export type KeyLookup = (key: string, budget?: AttemptBudget) => MaybePromise<Principal | null>;

/** A KeyLookup with its caches, which the key changes announced on NATS keep current. */
export type CachedKeyLookup = KeyLookup & {
  /** Drops what is cached of the key and reads its state again (a revocation, rotation or a new key). */
  forget(keyId: string): void;
  /**
   * Whether the key with this id authenticates now (an inbox token works while its minting key
   * does): from memory when known, cached like a lookup, announced changes applied at once.
   */
  active(keyId: string): MaybePromise<boolean>;
  /** Whether a presented credential is one this lookup can vouch for without the budget. */
  vouches(key: string): boolean;
  /** Stops the periodic refresh of the active keys held in memory. */
  close(): void;
  /** Settles once the credentials secret and the active keys are first read (or failed to be). */
  ready: Promise<void>;
};

export interface KeyLookupOptions {
  log?: Logger;
  /**
   * How often the set of active keys held in memory is read again in full (announced changes
   * apply at once; this bounds one missed). 0: never after the first read.
   */
  directoryRefreshMs?: number;
  /** How soon a failed read of the credentials secret or the active keys is tried again (5 s). */
  retryMs?: number;
}

/** How soon a failed read of the secret or the active keys is tried again, by default. */
const RETRY_MS = 5_000;

/**
 * The hashes of every key that authenticates now, held in memory (a prefix of each hash: a
 * collision only spares a random key the budget, it never authenticates one). Read at start and
 * every `refreshMs` (sooner after a failed read); a key change applies at once through `update`,
 * and one heard while a full read runs is applied again after it, so the read cannot undo it.
 */
function createKeyDirectory(database: Database, refreshMs: number, retryMs: number, log?: Logger) {
  let hashes = new Set<string>();
  const short = (hash: string) => hash.slice(0, 20);
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let changedDuringLoad: Set<string> | null = null;
  const apply = async (keyId: string) => {
    try {
      const row = await findKeyHash(database, keyId);
      if (row === null) return;
      if (row.active) hashes.add(short(row.key_hash));
      else hashes.delete(short(row.key_hash));
    } catch (error) {
      log?.debug({ err: error, key_id: keyId }, "could not read a changed API key; the refresh will");
    }
  };
  const load = async (): Promise<boolean> => {
    const changed = new Set<string>();
    changedDuringLoad = changed;
    try {
      const rows = await listActiveKeyHashes(database);
      hashes = new Set(rows.map((row) => short(row.key_hash)));
      return true;
    } catch (error) {
      log?.warn({ err: error }, "could not read the active API keys; unknown keys are looked up against the budget");
      return false;
    } finally {
      changedDuringLoad = null;
      await Promise.all([...changed].map(apply));
    }
  };
  const schedule = (loaded: boolean) => {
    if (closed || refreshMs <= 0) return;
    timer = setTimeout(() => void load().then(schedule), loaded ? refreshMs : Math.min(refreshMs, retryMs));
    timer.unref();
  };
  const ready = load().then(schedule);
  return {
    ready,
    has: (hash: string) => hashes.has(short(hash)),
    update(keyId: string): Promise<void> {
      changedDuringLoad?.add(keyId);
      return apply(keyId);
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}

/**
 * Looks a presented key up by hash, with a short cache: a revocation reaches every process at
 * once through `forget` (ingest calls it for each key change announced on NATS), and within
 * `ttlMs` where an announcement was missed. Unknown keys are cached too, so a flood of bad keys
 * does not reach Postgres, in a cache of their own: however many random keys arrive, they never
 * evict a valid one. Both are bounded LRUs. Concurrent lookups of one key share one query, so a
 * key is looked up in Postgres at most once per `ttlMs` however many requests present it. A key
 * whose `revoked_at` lies ahead is in a rotation grace period and still authenticates.
 */
export function createKeyLookup(database: Database, ttlMs: number, options: KeyLookupOptions = {}): CachedKeyLookup {
  const { log } = options;
  // A ttl of 0 means no cache (lru-cache would read it as "forever").
  const cached = ttlMs > 0;
  // By hash; a revocation announced on NATS forgets every hash of its key id.
  const known = createForgettableCache<Principal | null>({
    max: MAX_ENTRIES,
    ttlMs,
    tagOf: (hash, principal) => principal?.keyId ?? hash,
  });
  const states = createForgettableCache<boolean>({ max: MAX_ENTRIES, ttlMs });
  const unknown = new LRUCache<string, true>({ max: MAX_UNKNOWN, ttl: Math.max(1, ttlMs) });
  const inFlight = new Map<string, Promise<Principal | null>>();
  const touched = new LRUCache<string, true>({ max: MAX_ENTRIES, ttl: TOUCH_INTERVAL_MS });
  const retryMs = options.retryMs ?? RETRY_MS;
  const directory = createKeyDirectory(database, options.directoryRefreshMs ?? 60_000, retryMs, log);
  let macKeys: CredentialKeys | undefined;
  let macTried = 0;
  // Read at start and, after a failure, again on a lookup at most every `retryMs`.
  const readMacKeys = () => {
    macTried = Date.now();
    return loadCredentialKeys(database).then(
      (keys) => {
        macKeys = keys;
      },
      (error: unknown) =>
        log?.warn({ err: error }, "could not read the credentials secret; keys are checked by lookup"),
    );
  };
  const macReady = readMacKeys();
  // Until both are read (the first moments after start), a key goes through the budgeted path.
  const ready = Promise.all([macReady, directory.ready]).then(() => {});

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

  /** A lookup that needs no budget: the key is known to be, or to have been, this deployment's. */
  const unbudgeted = (hash: string): MaybePromise<Principal | null> => {
    if (cached && unknown.has(hash)) return null;
    const running = inFlight.get(hash);
    if (running) return running;
    const started = query(hash).finally(() => inFlight.delete(hash));
    inFlight.set(hash, started);
    return started;
  };

  const lookup = (key: string, hash: string, budget?: AttemptBudget): MaybePromise<Principal | null> => {
    const hit = known.get(hash);
    if (hit) return hit;
    if (macKeys === undefined && Date.now() - macTried >= retryMs) void readMacKeys();
    const form = macKeys === undefined ? "unsigned" : keyForm(macKeys, key);
    if (form === "forged") {
      budget?.charge();
      return null;
    }
    if (form === "signed" || directory.has(hash)) return unbudgeted(hash);
    // Past here a random key and a valid one look alike until Postgres answers: the attempt is
    // reserved first (so parallel guesses cannot overdraw the budget) and given back if valid.
    try {
      budget?.check();
    } catch (error) {
      return Promise.reject(error);
    }
    budget?.charge();
    return andThen(unbudgeted(hash), (principal) => {
      if (principal) budget?.refund();
      return principal;
    });
  };

  const keyLookup: KeyLookup = (key, budget) =>
    andThen(lookup(key, hashKey(key), budget), (principal) => {
      if (principal) touch(principal.keyId);
      return principal;
    });
  return Object.assign(keyLookup, {
    forget: (keyId: string) => {
      known.forget(keyId);
      states.forget(keyId);
      void directory.update(keyId);
    },
    active: (keyId: string): MaybePromise<boolean> => {
      const hit = states.get(keyId);
      if (hit !== undefined) return hit;
      let until = Number.POSITIVE_INFINITY;
      return states.load(
        keyId,
        async () => {
          const row = await findActiveKeyById(database, keyId);
          until = row?.revoked_at?.getTime() ?? until;
          return row !== null;
        },
        (active) => (active ? until - Date.now() : ttlMs),
      );
    },
    vouches: (key: string) => {
      const hash = hashKey(key);
      if (known.get(hash)) return true;
      const form = macKeys === undefined ? "unsigned" : keyForm(macKeys, key);
      return form === "unsigned" ? directory.has(hash) : form === "signed";
    },
    close: () => directory.close(),
    ready,
  });
}
