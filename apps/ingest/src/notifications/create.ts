import type { Bus } from "@notify/bus";
import { AppError, type MaybePromise } from "@notify/core";
import type { Database } from "@notify/db";
import { toAppError } from "@notify/http";
import type { Logger } from "@notify/log";
import { activeContext, activeTraceparent, tracingOn } from "@notify/telemetry";
import { commitBatch } from "./commit-batch.js";
import type { CreateResult, Pending } from "./idempotency.js";
import { type CreateInput, prepareNotification } from "./prepare.js";
import { createSettler } from "./settler.js";
import type { TemplateInfo } from "./templates.js";

export interface CreateDeps {
  database: Database;
  bus: Bus;
  templates: (id: string) => MaybePromise<TemplateInfo | null>;
  log: Logger;
}

/** Requests waiting for a group commit at most, when not configured (INGEST_QUEUE_LIMIT). */
export const DEFAULT_QUEUE_LIMIT = 10_000;

const queueFull = (limit: number) =>
  new AppError(
    "dependency_unavailable",
    `ingest is at capacity (${limit} notifications waiting to be stored); nothing was stored, retry later`,
    { context: { retryAfterSeconds: 1, dependency: "postgres" } },
  );

export interface Ingestor {
  create(input: CreateInput): Promise<CreateResult>;
  /** Waits for the batches in flight (shutdown). */
  drain(): Promise<void>;
}

/**
 * Accepts notifications (invariant 1) with group commit: requests that arrive
 * while a batch is being written wait for the next one, so under load one multi-row statement
 * claims the idempotency keys and inserts the rows of many requests, their lane publishes go
 * out together, and one statement settles their outbox rows. Each caller still hears 202 only
 * after its own row is committed and its own publish is acknowledged.
 *
 * A publish that definitely failed removes the row and releases the key (503, nothing left
 * behind); a publish whose outcome is unknown keeps the row for the recovery sweep (503, and a
 * retry with the same key gets 409 while it is settled, then 200 with the same id).
 *
 * The queue of requests waiting for a batch is bounded (`queueLimit`): while Postgres is slow
 * it would otherwise grow with every request, each holding its body and a socket. A request
 * that finds it full is refused at once, 503 with Retry-After, before anything is stored, so a
 * retry with the same key is a first attempt.
 */
export function createIngestor(
  deps: CreateDeps,
  options: { maxBatch?: number; maxConcurrentBatches?: number; overlapAt?: number; queueLimit?: number } = {},
): Ingestor {
  const maxBatch = options.maxBatch ?? 512;
  const maxConcurrent = options.maxConcurrentBatches ?? 2;
  const queueLimit = options.queueLimit ?? DEFAULT_QUEUE_LIMIT;
  const queue: Pending[] = [];
  const active = new Set<Promise<void>>();
  const settler = createSettler(deps);

  // A second batch goes out while one is in flight only once this many wait: a batch costs a
  // statement, a commit and a publish flush whatever its size, and starting one for whoever
  // arrives just after the first left would make most batches a single request under load.
  const overlapAt = Math.min(maxBatch, options.overlapAt ?? 32);
  const pump = () => {
    while (queue.length > 0 && (active.size === 0 || (active.size < maxConcurrent && queue.length >= overlapAt))) {
      const batch = queue.splice(0, maxBatch);
      const run: Promise<void> = commitBatch(deps, settler, batch)
        .catch((error: unknown) => {
          const failure = toAppError(error);
          if (failure.status >= 500) deps.log.error({ err: error, size: batch.length }, "batch failed");
          for (const item of batch) item.reject(failure);
        })
        .finally(() => {
          active.delete(run);
          pump();
        });
      active.add(run);
    }
  };
  // Requests whose bodies were read in one turn of the event loop join one batch: the batch
  // starts on the next turn rather than with the first of them.
  let scheduled = false;
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      pump();
    });
  };

  return {
    async create(input) {
      // Checked before and after the preparation (a template lookup may wait), never past the limit.
      if (queue.length >= queueLimit) throw queueFull(queueLimit);
      const preparing = prepareNotification(deps, input);
      const prepared = preparing instanceof Promise ? await preparing : preparing;
      if (queue.length >= queueLimit) throw queueFull(queueLimit);
      return new Promise<CreateResult>((resolve, reject) => {
        // The prepared request itself waits in the queue (no copy per request).
        const item = prepared as Pending;
        item.resolve = resolve;
        item.reject = reject;
        if (tracingOn()) {
          item.trace = activeContext();
          item.traceParent = activeTraceparent();
        }
        queue.push(item);
        schedule();
      });
    },
    async drain() {
      while (active.size > 0 || queue.length > 0) {
        // A batch that waits for its turn of the event loop starts now.
        pump();
        await Promise.allSettled([...active]);
      }
      await settler.stop();
    },
  };
}
