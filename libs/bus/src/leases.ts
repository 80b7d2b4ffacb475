import type { KV } from "@nats-io/kv";
import { isWrongLastSequence } from "./errors.js";

/**
 * Names (lane partitions, "singleton") spread over the live instances of one app, each held by
 * at most one instance at a time, through two keys of a KV bucket:
 *
 * - `members`: `{ [instance]: beats }`. Every instance bumps its own count each `tickMs` by
 *   compare-and-set. An instance whose count nobody has seen change for `ttlMs` is dead. Liveness
 *   is judged by each observer's own clock from changes it saw, so clocks need not agree.
 * - `leases`: `{ [name]: instance }`, changed only by compare-and-set: a name is claimed when it
 *   is free or its holder is dead, and given up only after its work has stopped.
 *
 * Each name's target is the live instance that ranks highest for it (rendezvous hashing), so
 * every instance computes the same spread and a join or leave moves only the names it must. An
 * instance whose own beat has not landed for half the TTL stops all its work before anyone else
 * may count it dead (fencing), and takes it up again when its beats land and its leases are
 * still its own.
 */
export interface LeaseOptions {
  kv: KV;
  /** This instance; stable across a restart of the same instance, so it finds its own leases. */
  id: string;
  names: readonly string[];
  /** Silence after which an instance is dead and its names may be taken. */
  ttlMs?: number;
  tickMs?: number;
  /** Starts the work of a name this instance now holds; resolves once it runs. */
  start(name: string): Promise<void>;
  /** Stops the work of a name; resolves once nothing of it is in hand (then the lease is given up). */
  stop(name: string): Promise<void>;
  onError?(error: unknown, what: string): void;
  now?: () => number;
}

export interface Leases {
  /** Whether this instance holds `name` and its work runs. */
  holds(name: string): boolean;
  held(): string[];
  /** False while fenced: this instance's beats have not landed for half the TTL. */
  healthy(): boolean;
  /** Stops the work of every held name, gives the leases up and leaves the members. */
  stop(): Promise<void>;
}

type Counts = Record<string, number>;
type Holders = Record<string, string>;

/**
 * A stable rank of (instance, name), the same in every process: FNV-1a 32, then murmur3's
 * finalizer, without which ids that differ in one character rank alike.
 */
function rank(id: string, name: string): number {
  let hash = 0x811c9dc5;
  for (const char of `${id}\u0000${name}`) {
    hash ^= char.charCodeAt(0);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/** The live instance a name belongs on: the highest rank, ties to the smaller id. */
export function targetOf(name: string, alive: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestRank = -1;
  for (const id of alive) {
    const r = rank(id, name);
    if (r > bestRank || (r === bestRank && best !== undefined && id < best)) {
      best = id;
      bestRank = r;
    }
  }
  return best;
}

const decode = <T>(entry: { json<V>(): V; operation: string } | null): T | null =>
  entry === null || entry.operation !== "PUT" ? null : entry.json<T>();

/** Compare-and-set of one JSON key: `change` gets the current value (null when absent). */
async function swap<T>(kv: KV, key: string, change: (current: T | null) => T | null): Promise<T | null> {
  for (let attempt = 0; ; attempt++) {
    const entry = await kv.get(key);
    const current = decode<T>(entry);
    const next = change(current);
    if (next === null) return current;
    try {
      if (entry === null) await kv.create(key, JSON.stringify(next));
      else await kv.update(key, JSON.stringify(next), entry.revision);
      return next;
    } catch (error) {
      // Another instance wrote in between: read again. Anything else is the caller's.
      if (attempt > 50 || !isWrongLastSequence(error)) throw error;
    }
  }
}

export function startLeases(options: LeaseOptions): Leases {
  const { kv, id } = options;
  const ttlMs = options.ttlMs ?? 10_000;
  const tickMs = options.tickMs ?? 1000;
  const now = options.now ?? Date.now;
  const onError = options.onError ?? (() => {});
  /** Each member's last count and when this instance saw it change. */
  const seen = new Map<string, { beats: number; at: number }>();
  /** Names whose work runs here (start resolved), and names being started or stopped. */
  const running = new Set<string>();
  const busy = new Map<string, Promise<void>>();
  let lastBeat = 0;
  let fenced = false;
  let stopped = false;

  const observe = (members: Counts) => {
    const t = now();
    for (const [member, beats] of Object.entries(members)) {
      const before = seen.get(member);
      if (before === undefined || before.beats !== beats) seen.set(member, { beats, at: t });
    }
    for (const member of seen.keys()) if (!(member in members)) seen.delete(member);
  };
  const alive = (): string[] =>
    [...seen.entries()].filter(([member, s]) => member === id || now() - s.at < ttlMs).map(([member]) => member);

  const beat = async () => {
    const members = await swap<Counts>(kv, "members", (current) => {
      const next: Counts = { ...(current ?? {}) };
      observe(next);
      // A member silent for three TTLs is forgotten (its leases were free after one).
      for (const [member, s] of seen) if (member !== id && now() - s.at > 3 * ttlMs) delete next[member];
      next[id] = (next[id] ?? 0) + 1;
      return next;
    });
    if (members) observe(members);
    lastBeat = now();
  };

  const run = (name: string, work: () => Promise<void>) => {
    if (busy.has(name)) return;
    const task = work()
      .catch((error) => onError(error, name))
      .finally(() => busy.delete(name));
    busy.set(name, task);
  };
  const begin = (name: string) =>
    run(name, async () => {
      await options.start(name);
      // Fenced or stopping while it started: its work must not run unleased.
      if (stopped || fenced) await options.stop(name);
      else running.add(name);
    });
  const end = (name: string, giveUp: boolean) =>
    run(name, async () => {
      running.delete(name);
      await options.stop(name);
      if (giveUp) await swap<Holders>(kv, "leases", (h) => (h?.[name] === id ? withoutName(h, name) : null));
    });
  const withoutName = (holders: Holders, name: string): Holders => {
    const { [name]: _gone, ...rest } = holders;
    return rest;
  };

  const balance = async () => {
    const live = alive();
    const liveSet = new Set(live);
    const holders = decode<Holders>(await kv.get("leases")) ?? {};
    // Names held here that another instance took while this one was silent: stop at once.
    for (const name of running) if (holders[name] !== id) end(name, false);
    const claim: string[] = [];
    for (const name of options.names) {
      const holder = holders[name];
      const target = targetOf(name, live);
      if (holder === id) {
        if (target !== id && target !== undefined) end(name, true);
        else if (!running.has(name)) begin(name);
      } else if (target === id && (holder === undefined || !liveSet.has(holder))) claim.push(name);
    }
    if (claim.length === 0) return;
    const won = await swap<Holders>(kv, "leases", (current) => {
      const next = { ...(current ?? {}) };
      let changed = false;
      for (const name of claim) {
        const holder = next[name];
        if (holder === undefined || (holder !== id && !liveSet.has(holder))) {
          next[name] = id;
          changed = true;
        }
      }
      return changed ? next : null;
    });
    for (const name of claim) if (won?.[name] === id && !running.has(name)) begin(name);
  };

  // Fencing: others count this instance dead after ttlMs of silence; its work stops first, at
  // half of it. Checked by a timer of its own, not only after a beat: a beat can hang for as long
  // as a request's timeout while a NATS node is lost, longer than the TTL allows.
  const fence = (): boolean => {
    if (now() - lastBeat <= ttlMs / 2) return false;
    if (!fenced) for (const name of [...running]) end(name, false);
    fenced = true;
    return true;
  };
  const fenceTimer = setInterval(fence, Math.max(10, Math.min(tickMs, ttlMs / 10)));
  fenceTimer.unref();

  const loop = (async () => {
    while (!stopped) {
      try {
        await beat();
      } catch (error) {
        onError(error, "heartbeat");
      }
      if (!fence()) {
        fenced = false;
        try {
          await balance();
        } catch (error) {
          onError(error, "balance");
        }
      }
      await new Promise((resolve) => setTimeout(resolve, tickMs));
    }
  })();

  return {
    holds: (name) => running.has(name) && !fenced,
    held: () => [...running],
    healthy: () => !fenced,
    async stop() {
      stopped = true;
      await loop;
      clearInterval(fenceTimer);
      await Promise.allSettled([...busy.values()]);
      const mine = [...running];
      for (const name of mine) end(name, false);
      await Promise.allSettled([...busy.values()]);
      await swap<Holders>(kv, "leases", (h) => {
        if (!h) return null;
        const next = Object.fromEntries(Object.entries(h).filter(([, holder]) => holder !== id));
        return Object.keys(next).length === Object.keys(h).length ? null : next;
      }).catch((error) => onError(error, "leave"));
      await swap<Counts>(kv, "members", (m) => {
        if (!m || !(id in m)) return null;
        const { [id]: _me, ...rest } = m;
        return rest;
      }).catch((error) => onError(error, "leave"));
    },
  };
}
