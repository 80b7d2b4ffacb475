import { claimGuard, type Disposition, type GuardEntry, settleGuard } from "@notify/bus";
import { type DeadlineDecision, decideAtDeadline, type ExpiryReason, type GuardValue } from "@notify/core";
import { type Attempt, moveStatus, recordAttempt } from "@notify/db";
import { type Context, done, jitter } from "./context.js";

const DETAIL: Record<ExpiryReason, string> = {
  deadline_passed: "its deliver-by deadline passed before it could be sent",
  deadline_before_quiet_hours_end: "quiet hours end after its deliver-by deadline",
  deadline_before_send_at: "its send time comes after its deliver-by deadline",
  deadline_before_next_attempt: "its next attempt would come after its deliver-by deadline",
};

/**
 * The deadline passed before a send was made: the policy ends the run (`decideAtDeadline`), and
 * its final state is taken on the guard by a compare-and-set on what was read, so no worker can
 * be sending under it, and a duplicate of this item finds it and does the same; the channel
 * follows.
 */
export async function expire(ctx: Context, seen: GuardEntry | null): Promise<Disposition> {
  const { deps, row } = ctx;
  const decision = decideAtDeadline("deadline_passed", seen?.value.accepted ?? [], seen?.value.settled ?? []);
  const claim = await claimGuard(deps.guard, ctx.key, seen, finalGuard(ctx, decision, row.attempts));
  // Changed since it was read: look again, it may have been sent meanwhile.
  if (claim === null) return { retryInMs: 500 + jitter(deps, 500) };
  return finish(ctx, decision, row.attempts);
}

/**
 * An attempt whose next one would come past the deadline (`tried`: its line, when it called the
 * provider): the guard gets the policy's final state (only its holder writes it), then the
 * channel follows.
 */
export async function endAtDeadline(
  ctx: Context,
  decision: DeadlineDecision,
  attempt: number,
  tried: Attempt | undefined,
): Promise<Disposition> {
  const { deps, item } = ctx;
  await settleGuard(deps.guard, ctx.key, finalGuard(ctx, decision, attempt));
  // A delivery records its attempt with its status.
  if (decision.action === "expire" && tried) await recordAttempt(deps.sql, item, tried);
  return finish(ctx, decision, attempt, tried);
}

/** The guard's final state for a run ended at the deadline: sent to the addresses that accepted, or expired. */
function finalGuard(ctx: Context, decision: DeadlineDecision, attempt: number): GuardValue {
  const base = { at: Date.now(), attempt, worker: ctx.deps.worker, provider: ctx.gate.provider.name };
  if (decision.action === "delivered_at_deadline") {
    return { ...base, state: "sent", provider_id: decision.providerId, accepted: decision.accepted };
  }
  const { reason, settled } = decision;
  return { ...base, state: "expired", reason, ...(settled.length > 0 ? { settled } : {}) };
}

function finish(ctx: Context, decision: DeadlineDecision, attempt: number, tried?: Attempt): Promise<Disposition> {
  return decision.action === "delivered_at_deadline"
    ? deliveredInPart(ctx, decision, attempt, tried)
    : expired(ctx, decision.reason, attempt);
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
  decision: Extract<DeadlineDecision, { action: "delivered_at_deadline" }>,
  attempts: number,
  tried?: Attempt,
): Promise<Disposition> {
  const { deps, item } = ctx;
  const { providerId, reason } = decision;
  await moveStatus(deps.sql, item, "delivered", {
    provider: ctx.gate.provider.name,
    providerId,
    reason,
    attempts,
    ...(tried ? { attempt: tried } : {}),
  });
  return done(ctx, "delivered", { attempt: attempts, provider_id: providerId, reason }, { ack: true });
}
