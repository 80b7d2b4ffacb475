import {
  countInboxItems,
  type Database,
  type InboxCounts,
  type InboxOwner,
  inboxItemsSince,
  listenForInboxItems,
  listenForInboxStates,
} from "@notify/db";
import type { Logger } from "@notify/log";

/** What woke a stream: items stored for its user, or a change of their states (its counts). */
export type InboxChange = "items" | "states";

/** `since`: the hub's sequence at the wake-up; a count asked with it reflects the change. */
type Wake = (change: InboxChange, since: number) => void;

/**
 * What feeds a process's open streams, one source for all of them: a stream queries only when
 * woken. Postgres NOTIFY (in the same statement as the insert or the update) wakes a user's
 * streams at once, through one LISTEN connection per process, on two channels: stored items
 * (the stream reads them, and counts when it found any) and changed states (the stream counts,
 * and reads no item). One poller per process covers a lost LISTEN connection: every `pollMs` one
 * statement finds which of the users with open streams got items since the newest item it saw,
 * and wakes theirs. When the LISTEN is back after a loss, every stream counts again (a change of
 * states has no trace the poller could find), and while there is none the poller has each stream
 * count at every poll. All of it runs only while a stream is open.
 *
 * `counts` shares one statement among the streams of one owner woken by the same change: a
 * count started after a wake-up reflects it, so a stream woken at `since` takes the owner's last
 * count, under way or done, when it started at or after it. A stream still busy reading items
 * when the others counted takes their count too. The last count of each owner is kept while the
 * owner's user has a stream open.
 */
export interface InboxHub {
  subscribe(userId: string, wake: Wake): () => void;
  /** The owner's counts as of `since` (a wake-up's sequence, or `sequence()`) or later. */
  counts(owner: InboxOwner, since: number): Promise<InboxCounts>;
  /** The hub's sequence now: a count asked with it reflects every change heard so far. */
  sequence(): number;
}

export function createInboxHub(database: Database, log: Logger, options: { pollMs: number }): InboxHub {
  const listeners = new Map<string, Set<Wake>>();
  let listening: Promise<Array<{ unlisten(): Promise<void> }> | null> | null = null;
  // Where the LISTEN stands: asked for (pending), in place (on), or failed (the poller stands in).
  let listenState: "off" | "pending" | "on" | "failed" = "off";
  let timer: NodeJS.Timeout | undefined;
  // The newest item id the poller has seen; null until its first statement (or after it stopped).
  let seen: number | null = null;
  let polling = false;
  // Every wake-up takes the next number; a count records the number it started at.
  let sequence = 0;
  // The last count of each of a user's owners (by user, then client), while the user has streams.
  const counted = new Map<string, Map<string, { started: number; counts: Promise<InboxCounts> }>>();

  const wakeUser = (userId: string, change: InboxChange) => {
    const set = listeners.get(userId);
    if (set === undefined) return;
    sequence += 1;
    for (const wake of set) wake(change, sequence);
  };
  const wakeAll = (change: InboxChange) => {
    for (const userId of [...listeners.keys()]) wakeUser(userId, change);
  };

  const onListening = () => {
    // The first LISTEN misses nothing (each stream counts when it opens); a later one follows a
    // lost connection, whose notifications are gone.
    if (listenState === "on") {
      wakeAll("items");
      wakeAll("states");
    }
    if (listenState !== "off") listenState = "on";
  };

  const listen = () => {
    if (listening !== null) return;
    listenState = "pending";
    const held = Promise.allSettled([
      listenForInboxItems(database, (userId) => wakeUser(userId, "items")),
      // Both are issued again on the one connection after a loss, items first: once the states'
      // is back, both are.
      listenForInboxStates(database, (userId) => wakeUser(userId, "states"), onListening),
    ])
      .then((results) => {
        const listens = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
        const failed = results.find((r) => r.status === "rejected");
        if (failed === undefined) return listens;
        // Both or neither: a half left in place would wake streams twice once both are retried.
        void Promise.all(listens.map((l) => l.unlisten())).catch(() => {});
        throw failed.reason;
      })
      .catch((error: unknown) => {
        // The poller still finds new items, only later, and has streams count at each poll; the
        // next stream retries the LISTEN.
        log.warn({ err: error }, "inbox LISTEN failed; streams are woken by the poller");
        if (listening === held) {
          listening = null;
          listenState = "failed";
        }
        return null;
      });
    listening = held;
  };

  const poll = async () => {
    timer = undefined;
    polling = true;
    let failed = false;
    try {
      const asked = [...listeners.keys()];
      const starting = seen === null;
      const found = await inboxItemsSince(database, seen, asked);
      seen = found.top ?? seen ?? 0;
      for (const userId of found.userIds) wakeUser(userId, "items");
      // A stream subscribed before the first statement, or while one ran, may have read its
      // inbox before items the statement counts as seen: it reads once more, so none is missed.
      const before = new Set(starting ? [] : asked);
      for (const userId of [...listeners.keys()]) if (!before.has(userId)) wakeUser(userId, "items");
      if (listenState === "failed") wakeAll("states");
    } catch (error) {
      failed = true;
      log.warn({ err: error }, "the inbox poll failed; the next one retries");
    } finally {
      polling = false;
      schedule(failed ? options.pollMs : undefined);
    }
  };

  /** The next poll: at once when there is no starting point yet, else after `pollMs`. */
  const schedule = (delayMs = seen === null ? 0 : options.pollMs) => {
    clearTimeout(timer);
    timer = undefined;
    if (listeners.size === 0) {
      seen = null;
      return;
    }
    timer = setTimeout(() => void poll(), delayMs);
    timer.unref();
  };

  const stopWhenIdle = () => {
    if (listeners.size > 0) return;
    clearTimeout(timer);
    timer = undefined;
    if (!polling) seen = null;
    if (listening === null) return;
    const held = listening;
    listening = null;
    listenState = "off";
    void held.then((all) => Promise.all((all ?? []).map((l) => l.unlisten()))).catch(() => {});
  };

  return {
    subscribe(userId, wake) {
      const set = listeners.get(userId) ?? new Set<Wake>();
      set.add(wake);
      listeners.set(userId, set);
      listen();
      if (timer === undefined && !polling) schedule();
      return () => {
        set.delete(wake);
        if (set.size === 0 && listeners.get(userId) === set) {
          listeners.delete(userId);
          counted.delete(userId);
        }
        stopWhenIdle();
      };
    },
    sequence: () => sequence,
    counts(owner, since) {
      const byClient = counted.get(owner.userId) ?? new Map();
      const last = byClient.get(owner.clientId);
      if (last !== undefined && last.started >= since) return last.counts;
      const entry = {
        started: sequence,
        // A failed count is not kept: the next stream to ask counts again.
        counts: countInboxItems(database, owner).catch((error: unknown) => {
          if (byClient.get(owner.clientId) === entry) byClient.delete(owner.clientId);
          throw error;
        }),
      };
      byClient.set(owner.clientId, entry);
      if (listeners.has(owner.userId)) counted.set(owner.userId, byClient);
      return entry.counts;
    },
  };
}
