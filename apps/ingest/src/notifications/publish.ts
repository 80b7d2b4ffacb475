import type { Bus } from "@notify/bus";
import type { AppError } from "@notify/core";
import { type Database, narrowOutboxRow, removeUnpublished } from "@notify/db";
import { toAppError } from "@notify/http";
import type { Logger } from "@notify/log";
import { withContext } from "@notify/telemetry";
import type { Pending } from "./idempotency.js";
import type { Settler } from "./settler.js";

/**
 * A publish that timed out may still land (the client buffers while reconnecting), so the row
 * is kept for the recovery sweep; any other failure means nothing was stored by JetStream.
 */
const isAmbiguous = (error: unknown) => (error as { name?: string })?.name === "TimeoutError";

export interface PublishOutcome {
  published: string[];
  /** Definitely not stored by JetStream. */
  failed: string[];
  /** Outcome unknown: left for the recovery sweep. */
  ambiguous: string[];
  /** What each caller whose publish did not succeed is answered. */
  failures: Array<{ item: Pending; error: AppError }>;
}

/** Publishes the committed notifications of a batch to their lanes, together; msg id = notification id. */
export async function publishLanes(deps: { bus: Bus; log: Logger }, claimed: Pending[]): Promise<PublishOutcome> {
  const outcome: PublishOutcome = { published: [], failed: [], ambiguous: [], failures: [] };
  const failed = (item: Pending, error: unknown) => {
    if (isAmbiguous(error)) {
      outcome.ambiguous.push(item.message.notification_id);
      deps.log.warn(
        { err: error, notification_id: item.message.notification_id },
        "publish outcome unknown; the recovery sweep will settle it",
      );
    } else {
      outcome.failed.push(item.message.notification_id);
    }
    outcome.failures.push({ item, error: toAppError(error) });
  };
  // Plain callbacks, not an async function per message: this runs for every request.
  await Promise.all(
    claimed.map((item) => {
      const { message } = item;
      let publishing: Promise<unknown>;
      try {
        const subject = deps.bus.subjects.lane(message.priority, item.partition);
        // In the request's own trace context (the batch runs outside it), when tracing is on.
        publishing =
          item.trace === undefined
            ? deps.bus.publish(subject, message, message.notification_id)
            : withContext(item.trace, () => deps.bus.publish(subject, message, message.notification_id));
      } catch (error) {
        failed(item, error);
        return undefined;
      }
      return publishing.then(
        () => {
          outcome.published.push(message.notification_id);
        },
        (error: unknown) => failed(item, error),
      );
    }),
  );
  return outcome;
}

/**
 * Brings the batch's outbox row in line with what was published, before anyone is answered:
 * definitely failed rows are removed with their keys (a retry starts afresh), when the sweep has
 * not taken the batch; a fully published batch's row is handed to the settler; otherwise the row
 * keeps only the unsettled notifications, so a retry of a published one is a replay (200) in
 * every process, not a 409.
 */
export async function settleOutbox(
  deps: { database: Database; log: Logger },
  settler: Settler,
  outboxId: string | null,
  claimedCount: number,
  outcome: PublishOutcome,
): Promise<void> {
  const unsettled = [...outcome.ambiguous];
  if (outcome.failed.length > 0) {
    const removed = outboxId === null ? 0 : await compensate(deps, outboxId, outcome.failed);
    // Rows not removed stay listed for the sweep, which publishes them (their callers got 503 and
    // a retry is answered 409, then 200 once the sweep has published).
    if (removed < outcome.failed.length) unsettled.push(...outcome.failed);
  }
  if (outboxId === null) return;
  if (unsettled.length === 0) {
    settler.add(outboxId, outcome.published);
  } else if (unsettled.length < claimedCount) {
    await narrowOutboxRow(deps.database, outboxId, unsettled).catch((error: unknown) =>
      deps.log.warn({ err: error }, "narrowing the outbox row failed; the sweep republishes the batch"),
    );
  }
}

/** Deletes the failed notifications while the batch's outbox row is ours; answers how many went. */
async function compensate(deps: { database: Database; log: Logger }, outboxId: string, ids: string[]): Promise<number> {
  try {
    return await removeUnpublished(deps.database, outboxId, ids);
  } catch (error) {
    deps.log.warn({ err: error, count: ids.length }, "compensating delete failed; the recovery sweep will publish");
    return 0;
  }
}
