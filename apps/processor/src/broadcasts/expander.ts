import type { Bus } from "@notify/bus";
import { type LaneMessage, partitionOf } from "@notify/core";
import { type Database, expandBroadcastBatch, settleBroadcastOutbox } from "@notify/db";
import type { Logger } from "@notify/log";
import { every, type Leader } from "../periodic.js";

export interface ExpanderDeps {
  database: Database;
  bus: Bus;
  log: Logger;
}

export interface Expander {
  /** Finishes the batch in hand, then stops. */
  stop(): Promise<void>;
}

export type BatchResult =
  | { kind: "idle" }
  | { kind: "finished"; broadcastId: string }
  | { kind: "expanded"; count: number };

/**
 * Expands one batch of one broadcast: the batch's notifications, recipient rows
 * and cursor move are written in one transaction (libs/db expandBroadcastBatch), so no member is
 * skipped and none gets two.
 *
 * The lane publishes follow the commit, as in ingest: the batch is listed in publish_outbox in
 * the same transaction, msg id = notification id, and a batch a crash or a failed publish left
 * in the outbox is republished by ingest's recovery sweep.
 */
export async function expandBatch(deps: ExpanderDeps, batchSize: number): Promise<BatchResult> {
  const partitions = deps.bus.naming.partitions;
  const step = await expandBroadcastBatch(deps.database, batchSize, partitions);
  if (step.kind !== "expanded") return step;
  const { broadcast, outboxId } = step;
  const messages: LaneMessage[] = step.recipients.map((row) => ({
    notification_id: row.notification_id,
    client_id: broadcast.client_id,
    user_id: row.user_id,
    category: broadcast.category,
    template_id: broadcast.template_id,
    ...(broadcast.template_version === null ? {} : { template_version: broadcast.template_version }),
    priority: "promotional",
    channels: broadcast.requested_channels,
    data: broadcast.data,
    created_at: row.created_at.toISOString(),
  }));
  const result: BatchResult = { kind: "expanded", count: messages.length };
  if (messages.length > 0) {
    // Published together: the publisher pipelines them on one ack inbox.
    const published = await Promise.allSettled(
      messages.map((m) =>
        deps.bus.publish(
          deps.bus.subjects.lane("promotional", partitionOf(m.user_id, partitions)),
          m,
          m.notification_id,
        ),
      ),
    );
    const done = published.filter((p) => p.status === "fulfilled").length;
    if (done === messages.length && outboxId !== null) {
      await settleBroadcastOutbox(deps.database, outboxId).catch((error: unknown) =>
        deps.log.warn({ err: error }, "settling the outbox failed; the recovery sweep will republish"),
      );
    } else {
      deps.log.warn(
        { unpublished: messages.length - done },
        "broadcast publishes failed; the recovery sweep retries them",
      );
    }
  }
  return result;
}

/**
 * The processor's broadcast loop: batch after batch while there is work, then a nap of
 * `intervalMs`. All state is in Postgres, so a restarted or second processor resumes exactly.
 */
export function startExpander(
  deps: ExpanderDeps,
  options: { intervalMs: number; batchSize: number; leader?: Leader },
): Expander {
  return every(
    options.intervalMs,
    deps.log,
    "expanding broadcasts",
    async (isStopping) => {
      let result: BatchResult;
      do {
        result = await expandBatch(deps, options.batchSize);
        if (result.kind === "finished") deps.log.info({ broadcast_id: result.broadcastId }, "broadcast expanded");
      } while (!isStopping() && result.kind !== "idle");
    },
    options.leader,
  );
}
