import { applyPendingReceipts, type Sql } from "@notify/db";
import type { Logger } from "@notify/log";

/** Retries receipts that arrived before their send was recorded, every `intervalMs`. */
export function startReceiptSweep(sql: Sql, log: Logger, intervalMs: number): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(async () => {
      try {
        const applied = await applyPendingReceipts(sql);
        if (applied > 0) log.info({ applied }, "pending receipts applied");
      } catch (error) {
        log.warn({ err: error }, "pending receipts sweep failed; retrying next tick");
      }
    });
  }, intervalMs);
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
