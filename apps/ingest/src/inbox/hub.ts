import { type Database, inboxItemsSince, listenForInboxItems } from "@notify/db";
import type { Logger } from "@notify/log";

type Wake = () => void;

/**
 * What feeds a process's open streams, one source for all of them: a stream queries only when
 * woken. Postgres NOTIFY (in the same statement as the insert) wakes a user's streams at once,
 * through one LISTEN per process; one poller per process covers a lost LISTEN connection: every
 * `pollMs` one statement finds which of the users with open streams got items since the newest
 * item it saw, and wakes theirs. Both run only while a stream is open.
 */
export interface InboxHub {
  subscribe(userId: string, wake: Wake): () => void;
}

export function createInboxHub(database: Database, log: Logger, options: { pollMs: number }): InboxHub {
  const listeners = new Map<string, Set<Wake>>();
  let listening: Promise<{ unlisten(): Promise<void> } | null> | null = null;
  let timer: NodeJS.Timeout | undefined;
  // The newest item id the poller has seen; null until its first statement (or after it stopped).
  let seen: number | null = null;
  let polling = false;

  const wakeUser = (userId: string) => {
    for (const wake of listeners.get(userId) ?? []) wake();
  };

  const listen = () => {
    listening ??= listenForInboxItems(database, wakeUser).catch((error: unknown) => {
      // The poller still finds new items, only later; the next stream retries the LISTEN.
      log.warn({ err: error }, "inbox LISTEN failed; streams are woken by the poller");
      listening = null;
      return null;
    });
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
      for (const userId of found.userIds) wakeUser(userId);
      // A stream subscribed before the first statement, or while one ran, may have read its
      // inbox before items the statement counts as seen: it reads once more, so none is missed.
      const before = new Set(starting ? [] : asked);
      for (const userId of [...listeners.keys()]) if (!before.has(userId)) wakeUser(userId);
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
    void held.then((l) => l?.unlisten()).catch(() => {});
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
        if (set.size === 0 && listeners.get(userId) === set) listeners.delete(userId);
        stopWhenIdle();
      };
    },
  };
}
