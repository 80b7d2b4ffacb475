import { LRUCache } from "lru-cache";

/**
 * A bounded read-through cache of rows another instance may change at any moment (an API key
 * revoked, a template given a version), which every instance hears announced on NATS:
 * `forget(tag)` drops every entry carrying the tag, and a read that began before the forget does
 * not keep what it saw, as that may be the old row. The TTL bounds an announcement missed.
 */
export interface ForgettableCache<V> {
  /** The value kept for `key`, if any (null is a value: "there is no such row"). */
  get(key: string): V | undefined;
  /**
   * The value kept for `key`; else reads it through `read` and keeps it for `ttlOf(value)` ms
   * (the cache's TTL when absent; below 1, not kept), unless its tag was forgotten while the
   * read ran. Callers that miss while a read of the key is under way share it, unless a forget
   * came in between or nothing is cached (a TTL of 0: every load reads).
   */
  load(key: string, read: () => Promise<V>, ttlOf?: (value: V) => number): Promise<V>;
  forget(tag: string): void;
}

export function createForgettableCache<V>(options: {
  max: number;
  /** 0: nothing is kept (lru-cache would read a ttl of 0 as "forever"). */
  ttlMs: number;
  /** What `forget` names an entry by; the key itself when absent. */
  tagOf?: (key: string, value: V) => string;
}): ForgettableCache<V> {
  const { max, ttlMs } = options;
  const tagOf = options.tagOf ?? ((key: string) => key);
  const entries = new LRUCache<string, { value: V }>({ max, ttl: Math.max(1, ttlMs) });
  // When each tag was last forgotten, on a counter (two events in one millisecond stay ordered).
  const forgotten = new LRUCache<string, number>({ max, ttl: Math.max(1, ttlMs) });
  // Reads under way, by key: the requests that miss together (a popular entry expiring under
  // load) share one read instead of each sending its own to the database.
  const reading = new Map<string, Promise<V>>();
  let clock = 0;
  const get = (key: string): V | undefined => (ttlMs > 0 ? entries.get(key)?.value : undefined);
  return {
    get,
    load(key, read, ttlOf) {
      const hit = get(key);
      if (hit !== undefined) return Promise.resolve(hit);
      const running = ttlMs > 0 ? reading.get(key) : undefined;
      if (running !== undefined) return running;
      const began = ++clock;
      const started = (async () => {
        const value = await read();
        const ttl = Math.min(ttlMs, ttlOf ? ttlOf(value) : ttlMs);
        if (ttl >= 1 && (forgotten.get(tagOf(key, value)) ?? -1) < began) entries.set(key, { value }, { ttl });
        return value;
      })().finally(() => {
        if (reading.get(key) === started) reading.delete(key);
      });
      if (ttlMs > 0) reading.set(key, started);
      return started;
    },
    forget(tag) {
      // A read that began before this may return the old row: later callers start their own.
      // (Which reads carry the tag is known only once they answer; forgets are rare.)
      reading.clear();
      forgotten.set(tag, ++clock);
      if (!options.tagOf) entries.delete(tag);
      else for (const [key, entry] of entries.entries()) if (tagOf(key, entry.value) === tag) entries.delete(key);
    },
  };
}
