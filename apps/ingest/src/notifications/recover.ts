import type { Bus } from "@notify/bus";
import { type Database, purgeExpiredIdempotencyKeys, sweepPublishOutbox } from "@notify/db";
import type { Logger } from "@notify/log";
import { contextOf, withContext } from "@notify/telemetry";

/**
 * The recovery path of invariant 1: batches left in the outbox (a crash or a NATS failure
 * between commit and ack) are published again. The lane msg id is the notification id, so a
 * row whose first publish did land is deduplicated by JetStream, and past the duplicate window
 * the processor's routing is idempotent. At most `maxIds` notifications a sweep (a broadcast's
 * batch may list thousands); a batch row goes when every one of its notifications is published
 * (or gone), and otherwise keeps only those still to publish, so a failure never makes the
 * sweep publish the rest of its batch again. SKIP LOCKED lets several ingest processes sweep
 * at once.
 */
export async function recoverUnpublished(
  deps: { database: Database; bus: Bus; log: Logger },
  graceMs: number,
  maxIds = 2000,
): Promise<number> {
  if (!deps.bus.isConnected()) return 0;
  const published = await sweepPublishOutbox(deps.database, { graceMs, maxIds }, async (notifications) => {
    const outcomes = await Promise.allSettled(
      notifications.map(({ message, partition, traceParent }) =>
        // In the trace of the request that stored it (when tracing is on and it was traced).
        withContext(traceParent === null ? undefined : contextOf(traceParent), () =>
          deps.bus.publish(deps.bus.subjects.lane(message.priority, partition), message, message.notification_id),
        ),
      ),
    );
    const failed = new Set<string>();
    outcomes.forEach((outcome, i) => {
      if (outcome.status === "rejected") failed.add(notifications[i]?.message.notification_id as string);
    });
    if (failed.size > 0) {
      deps.log.warn({ count: failed.size, err: firstError(outcomes) }, "recovery publishes failed; will retry");
    }
    return failed;
  });
  if (published > 0) deps.log.info({ count: published }, "recovered unpublished notifications");
  return published;
}

const firstError = (outcomes: PromiseSettledResult<unknown>[]) =>
  outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected")?.reason;

/**
 * Deletes idempotency records past the dedup window from the guard's default partition (rows of
 * days the processor had not made a partition for yet: rare), a bounded slice at a time so that
 * the purge never holds long locks against ingest. The guard's daily partitions are dropped whole.
 */
export const purgeExpiredKeys = (database: Database, windowHours: number, limit = 5000): Promise<number> =>
  purgeExpiredIdempotencyKeys(database, windowHours, limit);
