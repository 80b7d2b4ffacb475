import type { Bus } from "@notify/bus";
import { type Database, purgeExpiredInboxTokenRevocations, purgeExpiredInboxTokens } from "@notify/db";
import type { Logger } from "@notify/log";
import { DEDUP_WINDOW_HOURS } from "./idempotency.js";
import { purgeExpiredKeys, recoverUnpublished } from "./recover.js";

export interface Maintenance {
  stop(): Promise<void>;
}

/**
 * Ingest's background work: the recovery sweep (committed but unpublished rows) every
 * interval, and about once a minute the purge of idempotency records past the window (those
 * the guard's default partition took), of
 * expired opaque inbox tokens, and of inbox token revocations whose tokens have all expired.
 */
export function startMaintenance(
  deps: { database: Database; bus: Bus; log: Logger },
  options: { intervalMs: number; graceMs: number },
): Maintenance {
  let running: Promise<unknown> = Promise.resolve();
  let lastPurge = 0;
  const tick = async () => {
    await recoverUnpublished(deps, options.graceMs);
    if (Date.now() - lastPurge > 60_000) {
      lastPurge = Date.now();
      const purged = await purgeExpiredKeys(deps.database, DEDUP_WINDOW_HOURS);
      if (purged > 0) deps.log.info({ purged }, "purged expired idempotency records");
      const tokens = await purgeExpiredInboxTokens(deps.database);
      if (tokens > 0) deps.log.info({ purged: tokens }, "purged expired inbox tokens");
      const revocations = await purgeExpiredInboxTokenRevocations(deps.database);
      if (revocations > 0)
        deps.log.info({ purged: revocations }, "purged inbox token revocations past every token's expiry");
    }
  };
  const timer = setInterval(() => {
    running = running.then(tick).catch((error: unknown) => deps.log.warn({ err: error }, "maintenance failed"));
  }, options.intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
