import { type Database, listenForInboxItems } from "@notify/db";
import type { Logger } from "@notify/log";

type Wake = () => void;

/**
 * Wakes a user's open streams when an item is stored for them (Postgres NOTIFY in the same
 * statement as the insert): one LISTEN per process, held only while a stream is open.
 */
export interface InboxHub {
  subscribe(userId: string, wake: Wake): () => void;
}

export function createInboxHub(database: Database, log: Logger): InboxHub {
  const listeners = new Map<string, Set<Wake>>();
  let listening: Promise<{ unlisten(): Promise<void> } | null> | null = null;

  const start = () => {
    listening ??= listenForInboxItems(database, (userId) => {
      for (const wake of listeners.get(userId) ?? []) wake();
    }).catch((error: unknown) => {
      // Streams still poll, so they only get slower; the next stream retries the LISTEN.
      log.warn({ err: error }, "inbox LISTEN failed; streams fall back to polling");
      listening = null;
      return null;
    });
  };

  const stopWhenIdle = () => {
    if (listeners.size > 0 || listening === null) return;
    const held = listening;
    listening = null;
    void held.then((l) => l?.unlisten()).catch(() => {});
  };

  return {
    subscribe(userId, wake) {
      const set = listeners.get(userId) ?? new Set<Wake>();
      set.add(wake);
      listeners.set(userId, set);
      start();
      return () => {
        set.delete(wake);
        if (set.size === 0) listeners.delete(userId);
        stopWhenIdle();
      };
    },
  };
}
