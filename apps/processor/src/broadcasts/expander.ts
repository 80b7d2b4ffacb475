import type { Bus } from "@notify/bus";
import type { LaneMessage } from "@notify/core";
import { type Database, deleteSettledOutboxRows, type ExpansionStep, expandBroadcastBatch } from "@notify/db";
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

type ExpandedStep = Extract<ExpansionStep, { kind: "expanded" }>;

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
  const step = await expandBroadcastBatch(deps.database, batchSize, deps.bus.naming.partitions);
  if (step.kind !== "expanded") return step;
  const acknowledged = await publishBatch(deps, step);
  if (acknowledged !== null) await settle(deps, [acknowledged]);
  return { kind: "expanded", count: step.recipients.length };
}

/** Batches whose lane messages may be in flight at once (the `publishing` option's default). */
export const PUBLISHING_BATCHES = 2;

/**
 * Expands broadcasts batch after batch until none is left to expand or `isStopping()` answers
 * true, and answers how many recipients it expanded. The batches are pipelined: up to
 * `publishing` batches' lane messages are in flight at once, and each batch's transaction runs
 * while they are published, so Postgres and NATS work at once instead of in turn. With a single
 * batch publishing, nats-server would idle between batches while the expander waited for the
 * last acks and encoded the next batch; two keep it busy. A batch's outbox row, once all its
 * publishes are acknowledged, is deleted by a later batch's transaction rather than by one of
 * its own.
 *
 * Each batch keeps expandBatch's crash-safety: its rows, outbox row and cursor move commit
 * together before any of its publishes, and its outbox row is deleted only after all of them
 * are acknowledged (a crash in between leaves it to the recovery sweep, which JetStream
 * deduplicates by msg id). At most `publishing + 1` batches are in hand. The transaction that
 * finds no member left marks the broadcast expanded while the last batches' publishes may still
 * be in flight; it is reported finished (`onFinished`), and the call returns, only once every
 * publish before it has settled.
 */
export async function expandBroadcasts(
  deps: ExpanderDeps,
  batchSize: number,
  options: { isStopping?: () => boolean; onFinished?: (broadcastId: string) => void; publishing?: number } = {},
): Promise<number> {
  const partitions = deps.bus.naming.partitions;
  const isStopping = options.isStopping ?? (() => false);
  const depth =
    Number.isInteger(options.publishing) && (options.publishing as number) >= 1
      ? (options.publishing as number)
      : PUBLISHING_BATCHES;
  /** Batches being published, oldest first. */
  const inFlight: Promise<void>[] = [];
  /** Outbox rows of acknowledged batches, for the next transaction to delete. */
  let acknowledged: string[] = [];
  const drain = async () => {
    while (inFlight.length > 0) await inFlight.shift();
  };
  let count = 0;
  try {
    while (!isStopping()) {
      const settled = acknowledged;
      acknowledged = [];
      let step: ExpansionStep;
      try {
        step = await expandBroadcastBatch(deps.database, batchSize, partitions, settled);
      } catch (error) {
        acknowledged.push(...settled);
        throw error;
      }
      if (step.kind !== "expanded") {
        await drain();
        if (step.kind === "idle") break;
        options.onFinished?.(step.broadcastId);
        continue;
      }
      count += step.recipients.length;
      // The oldest batch settles before another one's publishes start.
      if (inFlight.length >= depth) await inFlight.shift();
      inFlight.push(
        publishBatch(deps, step).then((outboxId) => {
          if (outboxId) acknowledged.push(outboxId);
        }),
      );
    }
  } finally {
    await drain();
    if (acknowledged.length > 0) await settle(deps, acknowledged);
  }
  return count;
}

/**
 * Publishes a committed batch's lane messages, pipelined on the publisher's one ack inbox.
 * Answers the batch's outbox row when every publish was acknowledged, else null: the row stays
 * for ingest's recovery sweep. Never rejects.
 */
async function publishBatch(deps: ExpanderDeps, step: ExpandedStep): Promise<string | null> {
  try {
    await publishAll(deps.bus, step);
    return step.outboxId;
  } catch (error) {
    deps.log.warn({ err: error }, "broadcast publishes failed; the recovery sweep retries them");
    return null;
  }
}

/** Rejects unless every one of the batch's lane messages was acknowledged. */
async function publishAll(bus: Bus, step: ExpandedStep): Promise<void> {
  const { broadcast, recipients } = step;
  const subjects = Array.from({ length: bus.naming.partitions }, (_, p) => bus.subjects.lane("promotional", p));
  const createdAt = step.createdAt.toISOString();
  const version = broadcast.template_version === null ? {} : { template_version: broadcast.template_version };
  const published = await Promise.allSettled(
    recipients.map((r) => {
      const message: LaneMessage = {
        notification_id: r.notification_id,
        client_id: broadcast.client_id,
        user_id: r.user_id,
        category: broadcast.category,
        template_id: broadcast.template_id,
        ...version,
        priority: "promotional",
        channels: broadcast.requested_channels,
        data: broadcast.data,
        created_at: createdAt,
        ...(broadcast.deliver_by === null ? {} : { deliver_by: broadcast.deliver_by }),
      };
      return bus.publish(subjects[r.partition] as string, message, r.notification_id);
    }),
  );
  const failed = published.filter((p) => p.status === "rejected").length;
  if (failed > 0) throw new Error(`${failed} of ${recipients.length} lane publishes failed`);
}

/** Deletes acknowledged batches' outbox rows; a failure leaves them to the recovery sweep. */
async function settle(deps: ExpanderDeps, outboxIds: readonly string[]): Promise<void> {
  await deleteSettledOutboxRows(deps.database, outboxIds).catch((error: unknown) =>
    deps.log.warn({ err: error }, "settling the outbox failed; the recovery sweep will republish"),
  );
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
      await expandBroadcasts(deps, options.batchSize, {
        isStopping,
        onFinished: (broadcastId) => deps.log.info({ broadcast_id: broadcastId }, "broadcast expanded"),
      });
    },
    options.leader,
  );
}
