import { AppError } from "@notify/core";
import { type Database, DEDUP_WINDOW_HOURS, findIdempotencyRecords } from "@notify/db";
import type { Context } from "@notify/telemetry";
import type { Prepared } from "./prepare.js";

/** The dedup window (@notify/db's: the processor makes the guard's partitions by it). */
export { DEDUP_WINDOW_HOURS };
/** The in-progress lock of a first request. */
export const IN_FLIGHT_MS = 30_000;

export type CreateResult = { kind: "accepted"; notificationId: string } | { kind: "replayed"; notificationId: string };

/** A request waiting for its batch, with the way to answer its caller. */
export interface Pending extends Prepared {
  resolve(result: CreateResult): void;
  reject(error: unknown): void;
  /**
   * The request's trace context, while tracing is on: the group commit publishes after the
   * commit, outside the request's async context, so each lane message is published in its own
   * request's context explicitly, and the row stores its traceparent.
   */
  trace?: Context;
  traceParent?: string;
}

/**
 * Answers requests whose key was already claimed: a replay (200), a reuse with another body
 * (422) or in flight (409). `publishedHere` tells a notification this process published but
 * whose outbox row is not deleted yet, which is a replay, not in flight.
 */
export async function answerClaimedKeys(
  database: Database,
  publishedHere: (notificationId: string) => boolean,
  items: Pending[],
): Promise<void> {
  const rows = await findIdempotencyRecords(
    database,
    items.map((p) => ({ clientId: p.input.clientId, key: p.input.idempotencyKey })),
  );
  const byKey = new Map(rows.map((row) => [`${row.client_id}\u0000${row.key}`, row]));
  for (const item of items) {
    const existing = byKey.get(`${item.input.clientId}\u0000${item.input.idempotencyKey}`);
    if (!existing) {
      // A request that may only replay (its deadline passed) has nothing to replay: its own answer.
      // Otherwise the first request with this key failed and released it in the meantime.
      item.reject(
        item.refusal ??
          new AppError("idempotency_key_in_use", "a request with this Idempotency-Key was in progress; retry"),
      );
    } else if (existing.request_hash !== item.requestHash) {
      item.reject(
        new AppError("idempotency_key_reused", "this Idempotency-Key was used with a different request body"),
      );
    } else if (
      existing.unpublished &&
      !publishedHere(existing.notification_id) &&
      Date.now() - existing.created_at.getTime() < IN_FLIGHT_MS
    ) {
      item.reject(
        new AppError("idempotency_key_in_use", "a request with this Idempotency-Key is in progress; retry later", {
          context: { retryAfterSeconds: 1 },
        }),
      );
    } else {
      // Done, or committed by a first request that never heard back: the sweep publishes those.
      item.resolve({ kind: "replayed", notificationId: existing.notification_id });
    }
  }
}
