import type { Disposition } from "@notify/bus";
import type { ExpiryReason } from "@notify/core";
import { moveStatus } from "@notify/db";
import { type Context, done, jitter } from "./context.js";
import { claimGuard, type GuardEntry } from "./guard.js";

const DETAIL: Record<ExpiryReason, string> = {
  deadline_passed: "its deliver-by deadline passed before it could be sent",
  deadline_before_quiet_hours_end: "quiet hours end after its deliver-by deadline",
  deadline_before_next_attempt: "its next attempt would come after its deliver-by deadline",
};

/**
 * The deadline passed before a send was made: the guard is taken with the final state
 * `expired` (a compare-and-set on what was read, so no worker can be sending under it, and a
 * duplicate of this item finds it and does the same), then the channel is marked expired.
 */
export async function expire(ctx: Context, seen: GuardEntry | null): Promise<Disposition> {
  const { deps, row } = ctx;
  const claim = await claimGuard(deps.guard, ctx.key, seen, {
    state: "expired",
    at: Date.now(),
    attempt: row.attempts,
    worker: deps.worker,
    reason: "deadline_passed",
    ...(seen?.value.accepted ? { accepted: seen.value.accepted } : {}),
    ...(seen?.value.settled ? { settled: seen.value.settled } : {}),
  });
  // Changed since it was read: look again, it may have been sent meanwhile.
  if (claim === null) return { retryInMs: 500 + jitter(500) };
  return expired(ctx, "deadline_passed", row.attempts);
}

/** Marks the channel expired (its guard already says so) and ends the item. */
export async function expired(ctx: Context, reason: ExpiryReason, attempts: number): Promise<Disposition> {
  const { deps, item } = ctx;
  await moveStatus(deps.sql, item, "expired", { reason: `${reason}: ${DETAIL[reason]}`, attempts });
  return done(ctx, "expired", { attempt: attempts, reason, deliver_by: item.deliver_by }, { ack: true });
}
