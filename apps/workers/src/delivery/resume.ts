import { claimGuard, type Disposition, type GuardEntry } from "@notify/bus";
import { CANCEL_REASON, decideResume, type GuardValue } from "@notify/core";
import { moveStatus, recordAttempt } from "@notify/db";
import { addressesOf } from "./addresses.js";
import { gateNamed } from "./choose.js";
import { type Context, done, jitter } from "./context.js";
import { expired } from "./expire.js";
import { send } from "./send.js";
import { deadLetter, suppressed, unsettle } from "./settle.js";

/** Someone holds or held the claim: finish what the policy reads from it (`decideResume`). */
export async function resume(ctx: Context, seen: GuardEntry): Promise<Disposition> {
  const { deps, item } = ctx;
  const guard = seen.value;
  // What follows is about the send the guard records: its provider's, not this attempt's choice.
  ctx.gate = gateNamed(deps, guard.provider);
  const decision = decideResume({
    guard,
    idempotent: ctx.gate.provider.idempotent === true,
    claimTtlMs: deps.claimTtlMs,
    now: Date.now(),
    random: deps.random,
  });
  switch (decision.action) {
    case "delivered":
      await moveStatus(deps.sql, item, "delivered", {
        provider: ctx.gate.provider.name,
        providerId: decision.providerId,
        attempts: guard.attempt,
      });
      return done(ctx, "delivered", { reconciled: true, provider_id: guard.provider_id }, { ack: true });
    case "expired":
      return await expired(ctx, decision.reason, guard.attempt);
    case "suppressed":
      return await suppressed(ctx, guard.attempt, ctx.row.suppression);
    case "canceled":
      // Its client canceled it: nothing is sent and nothing recorded. The processor moved the
      // channel with the guard; should that write have been lost, the channel follows the guard.
      await moveStatus(deps.sql, item, "canceled", { reason: CANCEL_REASON });
      return done(ctx, "canceled", {}, { ack: true });
    case "dead_letter":
      await deadLetter(ctx, decision.class, decision.reason, guard.attempt);
      return done(ctx, "failed", { reconciled: true, reason: guard.reason }, { ack: true });
    case "unsettled":
      await unsettle(ctx, decision.reason, guard.attempt);
      return done(ctx, "unsettled", { reconciled: true, reason: guard.reason }, { ack: true });
    case "wait":
      return done(ctx, "skipped", { claim_worker: guard.worker }, { retryInMs: decision.delayMs });
    case "send_again":
      return await retake(ctx, seen);
    case "abandoned": {
      const { reason } = decision;
      const unknown: GuardValue = { ...guard, state: "unknown", at: Date.now(), reason };
      if (!(await claimGuard(deps.guard, ctx.key, seen, unknown))) return { retryInMs: 1000 + jitter(deps, 1000) };
      await recordAttempt(deps.sql, item, {
        attempt: guard.attempt,
        outcome: "unknown",
        provider: ctx.gate.provider.name,
        providerId: null,
        error: reason,
      });
      await unsettle(ctx, reason, guard.attempt);
      return done(ctx, "unsettled", { reason }, { ack: true });
    }
  }
}

/** Takes over a dead worker's claim on an idempotent provider and sends again. */
async function retake(ctx: Context, seen: GuardEntry): Promise<Disposition> {
  const { deps, item } = ctx;
  const headers = (await deps.unsubscribe?.(item)) ?? null;
  const claim = await claimGuard(deps.guard, ctx.key, seen, {
    ...seen.value,
    state: "sending",
    at: Date.now(),
    worker: deps.worker,
  });
  if (!claim) return { retryInMs: 1000 + jitter(deps, 1000) };
  const settled = new Set([...(seen.value.settled ?? []), ...(seen.value.accepted ?? []).map((a) => a.key)]);
  return send(
    ctx,
    claim,
    addressesOf(item).filter((a) => !settled.has(a.key)),
    headers,
  );
}
