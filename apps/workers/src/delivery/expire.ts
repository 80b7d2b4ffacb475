import { claimGuard, type Disposition, type GuardEntry, settleGuard } from "@notify/bus";
import type { ExpiryReason, GuardValue } from "@notify/core";
import { type Attempt, moveStatus, recordAttempt } from "@notify/db";
import { type Context, done, jitter } from "./context.js";

const DETAIL: Record<ExpiryReason, string> = {
  deadline_passed: "its deliver-by deadline passed before it could be sent",
  deadline_before_quiet_hours_end: "quiet hours end after its deliver-by deadline",
  deadline_before_next_attempt: "its next attempt would come after its deliver-by deadline",
};

type Accepted = NonNullable<GuardValue["accepted"]>;

/**
 * The deadline passed before a send was made: the guard is taken with the final state
 * `expired` (a compare-and-set on what was read, so no worker can be sending under it, and a
 * duplicate of this item finds it and does the same), then the channel is marked expired. When
 * earlier attempts had some of the addresses accept (a user's push subscriptions), it was
 * delivered in time to those: the guard says sent and the channel delivered instead.
 */
export async function expire(ctx: Context, seen: GuardEntry | null): Promise<Disposition> {
  const { deps, row } = ctx;
  const accepted = seen?.value.accepted ?? [];
  const base = { at: Date.now(), attempt: row.attempts, worker: deps.worker, provider: ctx.gate.provider.name };
  const final: GuardValue =
    accepted.length > 0
      ? { ...base, state: "sent", provider_id: (accepted[0] as Accepted[number]).provider_id, accepted }
      : {
          ...base,
          state: "expired",
          reason: "deadline_passed",
          ...(seen?.value.settled ? { settled: seen.value.settled } : {}),
        };
  const claim = await claimGuard(deps.guard, ctx.key, seen, final);
  // Changed since it was read: look again, it may have been sent meanwhile.
  if (claim === null) return { retryInMs: 500 + jitter(500) };
  if (accepted.length > 0) return deliveredInPart(ctx, accepted, row.attempts);
  return expired(ctx, "deadline_passed", row.attempts);
}

/**
 * After a definite refusal whose next attempt would come past the deadline: the guard gets its
 * final state (only its holder writes it), and the channel expires, or is delivered when some
 * of its addresses accepted in time.
 */
export async function endAtDeadline(
  ctx: Context,
  guard: { attempt: number; accepted: Accepted; settled: string[] },
  tried: Attempt | undefined,
): Promise<Disposition> {
  const { deps, item } = ctx;
  const base = { at: Date.now(), attempt: guard.attempt, worker: deps.worker, provider: ctx.gate.provider.name };
  const first = guard.accepted[0];
  if (first !== undefined) {
    await settleGuard(deps.guard, ctx.key, {
      ...base,
      state: "sent",
      provider_id: first.provider_id,
      accepted: guard.accepted,
    });
    return deliveredInPart(ctx, guard.accepted, guard.attempt, tried);
  }
  const reason = "deadline_before_next_attempt";
  await settleGuard(deps.guard, ctx.key, { ...base, state: "expired", reason, settled: guard.settled });
  if (tried) await recordAttempt(deps.sql, item, tried);
  return expired(ctx, reason, guard.attempt);
}

/** Marks the channel expired (its guard already says so) and ends the item. */
export async function expired(ctx: Context, reason: ExpiryReason, attempts: number): Promise<Disposition> {
  const { deps, item } = ctx;
  await moveStatus(deps.sql, item, "expired", { reason: `${reason}: ${DETAIL[reason]}`, attempts });
  return done(ctx, "expired", { attempt: attempts, reason, deliver_by: item.deliver_by }, { ack: true });
}

/** Some addresses took it before the deadline and the rest never will: delivered, saying so. */
async function deliveredInPart(
  ctx: Context,
  accepted: Accepted,
  attempts: number,
  tried?: Attempt,
): Promise<Disposition> {
  const { deps, item } = ctx;
  const providerId = (accepted[0] as Accepted[number]).provider_id;
  const reason = `${accepted.length} address(es) accepted before the deliver-by deadline; the others were not sent`;
  await moveStatus(deps.sql, item, "delivered", {
    provider: ctx.gate.provider.name,
    providerId,
    reason,
    attempts,
    ...(tried ? { attempt: tried } : {}),
  });
  return done(ctx, "delivered", { attempt: attempts, provider_id: providerId, reason }, { ack: true });
}
