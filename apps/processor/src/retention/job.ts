import { type Database, purgeSentDigests, purgeWebhookHistory } from "@notify/db";
import type { Logger } from "@notify/log";
import { archiveAll } from "@notify/ops";
import { every, type Leader } from "../periodic.js";

export interface RetentionJob {
  /** Finishes the batch in hand, then stops. */
  stop(): Promise<void>;
}

/**
 * The scheduled side of retention: every `intervalMs` it archives what is past the window,
 * in short transactions (libs/ops retention.ts), the same work `notify retention run` does, and
 * forgets the outbound webhook history of the same age.
 */
export function startRetention(
  deps: { database: Database; log: Logger },
  options: { intervalMs: number; days: number; dir: string; leader?: Leader },
): RetentionJob {
  return every(
    options.intervalMs,
    deps.log,
    "archiving notifications",
    async () => {
      const archived = await archiveAll(deps.database, { dir: options.dir, days: options.days });
      if (archived > 0) deps.log.info({ archived, dir: options.dir }, "archived notifications past retention");
      // Outbound webhook events, deliveries and attempts are kept as long as the notifications,
      // and so are sent digests.
      const purged = await drain(() => purgeWebhookHistory(deps.database, options.days));
      if (purged > 0) deps.log.info({ purged }, "forgot webhook events past retention");
      const digests = await drain(() => purgeSentDigests(deps.database, options.days));
      if (digests > 0) deps.log.info({ digests }, "forgot digests sent before retention");
    },
    options.leader,
  );
}

/** Runs a batched purge until a batch finds nothing: how many it removed in all. */
async function drain(batch: () => Promise<number>): Promise<number> {
  let total = 0;
  for (let removed = await batch(); removed > 0; removed = await batch()) total += removed;
  return total;
}
