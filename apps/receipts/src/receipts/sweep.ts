import { applyPendingReceipts, purgeUnmatchedReceipts, type Sql } from "@notify/db";
import type { MetricsRegistry } from "@notify/http";
import type { Logger } from "@notify/log";

export interface ReceiptSweepOptions {
  /** How often pending receipts are retried. */
  intervalMs: number;
  /** Receipts never matched to a send are deleted once older than this (RECEIPTS_UNMATCHED_RETENTION_HOURS). */
  unmatchedRetentionHours: number;
  /** How often the unmatched purge runs; a minute unless a test wants it sooner. */
  purgeEveryMs?: number;
  metrics?: MetricsRegistry;
}

const PURGE_EVERY_MS = 60_000;
const PURGE_BATCH = 1000;

/**
 * Retries receipts that arrived before their send was recorded, every `intervalMs`, and deletes
 * the ones that never matched a send once they are older than the retention (they would
 * otherwise pile up for ever: a send that was never recorded, another deployment's events on a
 * shared webhook). One tick at a time.
 */
export function startReceiptSweep(sql: Sql, log: Logger, options: ReceiptSweepOptions): { stop(): Promise<void> } {
  const purged = options.metrics?.counter(
    "notify_receipts_unmatched_purged_total",
    "Receipts deleted after RECEIPTS_UNMATCHED_RETENTION_HOURS without ever matching a send",
  );
  const purgeEveryMs = options.purgeEveryMs ?? PURGE_EVERY_MS;
  let lastPurge = 0;
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(async () => {
      try {
        const applied = await applyPendingReceipts(sql, undefined, options.unmatchedRetentionHours);
        if (applied > 0) log.info({ applied }, "pending receipts applied");
      } catch (error) {
        log.warn({ err: error }, "pending receipts sweep failed; retrying next tick");
      }
      if (Date.now() - lastPurge < purgeEveryMs) return;
      lastPurge = Date.now();
      try {
        let deleted = 0;
        for (;;) {
          const batch = await purgeUnmatchedReceipts(sql, {
            olderThanHours: options.unmatchedRetentionHours,
            limit: PURGE_BATCH,
          });
          deleted += batch;
          if (batch < PURGE_BATCH) break;
        }
        if (deleted > 0) {
          purged?.inc({}, deleted);
          log.warn(
            { purged: deleted, retention_hours: options.unmatchedRetentionHours },
            "unmatched receipts purged after retention",
          );
        }
      } catch (error) {
        log.warn({ err: error }, "unmatched receipts purge failed; retrying next time");
      }
    });
  }, options.intervalMs);
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
