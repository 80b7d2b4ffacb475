import { type Database, deleteSettledOutboxRows } from "@notify/db";
import type { Logger } from "@notify/log";

export interface Settler {
  /** The batch's outbox row can go: these of its notifications were published. */
  add(outboxId: string, published: string[]): void;
  /**
   * Published by this process recently: its outbox row is deleted, being deleted, or was deleted
   * within the last seconds (a duplicate's lookup may have read the outbox just before).
   */
  has(id: string): boolean;
  stop(): Promise<void>;
}

/**
 * Deletes settled outbox rows off the request path, many at a time, without waiting for the
 * WAL flush: a delete lost in a crash only makes the recovery sweep publish the batch again,
 * which JetStream deduplicates by msg id. This keeps one commit, the batch's own, between a
 * request and its 202.
 */
export function createSettler(deps: { database: Database; log: Logger }, intervalMs = 20, rememberMs = 5000): Settler {
  let pendingRows: string[] = [];
  let pendingIds = new Set<string>();
  let writingIds = new Set<string>();
  // The id sets of the deletes of the last `rememberMs`, oldest first (kept whole: no copying).
  const recent: Array<{ at: number; ids: Set<string> }> = [];
  let running: Promise<void> = Promise.resolve();
  const forget = () => {
    const now = Date.now();
    while (recent.length > 0 && (recent[0]?.at ?? now) < now - rememberMs) recent.shift();
  };
  const settle = async () => {
    forget();
    const rows = pendingRows;
    if (rows.length === 0) return;
    writingIds = pendingIds;
    pendingRows = [];
    pendingIds = new Set();
    await deleteSettledOutboxRows(deps.database, rows).catch((error: unknown) =>
      deps.log.warn({ err: error, count: rows.length }, "settling the outbox failed; the sweep will republish"),
    );
    recent.push({ at: Date.now(), ids: writingIds });
    writingIds = new Set();
  };
  // Armed by the first row to settle, not ticking while there is none: an idle process is not
  // woken fifty times a second, and each wake-up costs CPU.
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const due = () => {
    timer = undefined;
    running = running.then(settle);
  };
  return {
    add(outboxId, published) {
      pendingRows.push(outboxId);
      for (const id of published) pendingIds.add(id);
      if (timer === undefined && !stopped) {
        timer = setTimeout(due, intervalMs);
        timer.unref();
      }
    },
    has: (id) => {
      forget();
      return pendingIds.has(id) || writingIds.has(id) || recent.some((settled) => settled.ids.has(id));
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      running = running.then(settle);
      await running;
    },
  };
}
