import {
  type Database,
  DEDUP_WINDOW_HOURS,
  extendIdempotencyKeys,
  extendLog,
  purgeSentDigests,
  purgeWebhookHistory,
  retireIdempotencyKeys,
} from "@notify/db";
import type { Logger } from "@notify/log";
import { type ArchiveStore, archiveAll, retirePartitions } from "@notify/ops";
import { every, type Leader } from "../periodic.js";

export interface RetentionJob {
  /** Finishes the batch in hand, then stops. */
  stop(): Promise<void>;
}

/** How far ahead the log's partitions are made: a week, or two partitions if they are wider. */
const partitionsAheadMs = (hours: number) => Math.max(7 * 86_400_000, 2 * hours * 3_600_000);

/** Days of the idempotency guard's partitions made beyond those a claim made now writes in. */
const IDEMPOTENCY_MARGIN_DAYS = 3;

/**
 * The scheduled side of retention, on the leader: every `intervalMs` (and at start) it makes the
 * log's partitions a week ahead and the idempotency guard's daily ones through the dedup window
 * and three days more, drops the guard's partitions of days past (an hour after the day's end),
 * retires the partitions wholly past the window (archived into the
 * store, a folder or an S3 bucket, then dropped: libs/ops partition-retention.ts), archives the few
 * rows kept outside them row by row (libs/ops retention.ts, the same work `notify retention run`
 * does), and forgets the outbound webhook history of the same age.
 */
export function startRetention(
  deps: { database: Database; log: Logger },
  options: { intervalMs: number; days: number; store: ArchiveStore; partitionHours: number; leader?: Leader },
): RetentionJob {
  return every(
    options.intervalMs,
    deps.log,
    "archiving notifications",
    async () => {
      const made = await extendLog(deps.database, {
        aheadMs: partitionsAheadMs(options.partitionHours),
        widthHours: options.partitionHours,
      });
      if (made > 0) deps.log.info({ made, hours: options.partitionHours }, "made the log's partitions ahead");
      const slots = await extendIdempotencyKeys(deps.database, {
        windowHours: DEDUP_WINDOW_HOURS,
        marginDays: IDEMPOTENCY_MARGIN_DAYS,
      });
      if (slots > 0) deps.log.info({ made: slots }, "made the idempotency guard's daily partitions ahead");
      const past = await retireIdempotencyKeys(deps.database, DEDUP_WINDOW_HOURS);
      if (past > 0) deps.log.info({ dropped: past }, "dropped the idempotency guard's partitions of days past");
      const retired = await retirePartitions(deps.database, { store: options.store, days: options.days });
      if (retired.partitions > 0) {
        deps.log.info({ ...retired, archive: options.store.location }, "retired the log's partitions past retention");
      }
      const archived = await archiveAll(deps.database, { store: options.store, days: options.days });
      if (archived > 0) {
        deps.log.info({ archived, archive: options.store.location }, "archived notifications past retention");
      }
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
