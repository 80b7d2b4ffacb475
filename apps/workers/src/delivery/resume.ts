import { claimGuard, type Disposition, type GuardEntry } from "@notify/bus";
import type { ExpiryReason, GuardValue } from "@notify/core";
import { moveStatus, recordAttempt } from "@notify/db";
import { addressesOf } from "./addresses.js";
import { gateNamed } from "./choose.js";
import { type Context, done, jitter } from "./context.js";
import { expired } from "./expire.js";
import { send } from "./send.js";
import { deadLetter, unsettle } from "./settle.js";

/** Someone holds or held the claim: finish what it says, never send again. */
export async function resume(ctx: Context, seen: GuardEntry): Promise<Disposition> {
  const { deps, item } = ctx;
  const guard = seen.value;
  // What follows is about the send the guard records: its provider's, not this attempt's choice.
  ctx.gate = gateNamed(deps, guard.provider);
  switch (guard.state) {
    case "sent":
      // The provider accepted but the status write was lost: reconcile from the guard.
      await moveStatus(deps.sql, item, "delivered", {
        provider: ctx.gate.provider.name,
        providerId: guard.provider_id ?? null,
        attempts: guard.attempt,
      });
      return done(ctx, "delivered", { reconciled: true, provider_id: guard.provider_id }, { ack: true });
    case "expired":
      return await expired(ctx, expiryReason(guard.reason), guard.attempt);
    case "dead":
      await deadLetter(ctx, guard.class ?? "permanent", guard.reason ?? "dead-lettered", guard.attempt);
      return done(ctx, "failed", { reconciled: true, reason: guard.reason }, { ack: true });
    case "unknown":
      // A provider that ignores a repeated send (the in-app inbox) is simply asked again.
      if (ctx.gate.provider.idempotent) return await retake(ctx, seen);
      await unsettle(ctx, guard.reason ?? "outcome unknown", guard.attempt);
      return done(ctx, "unsettled", { reconciled: true, reason: guard.reason }, { ack: true });
    default: {
      const age = Date.now() - guard.at;
      // A live claim: its worker is still talking to the provider. Look again once it must be done.
      if (age < deps.claimTtlMs) {
        return done(
          ctx,
          "skipped",
          { claim_worker: guard.worker },
          { retryInMs: deps.claimTtlMs - age + jitter(1000) },
        );
      }
      // A provider that ignores a repeated send (the in-app inbox) is simply asked again.
      if (ctx.gate.provider.idempotent) return await retake(ctx, seen);
      const reason = `worker ${guard.worker ?? "?"} stopped after the provider call began; the provider may have accepted`;
      const unknown: GuardValue = { ...guard, state: "unknown", at: Date.now(), reason };
      if (!(await claimGuard(deps.guard, ctx.key, seen, unknown))) return { retryInMs: 1000 + jitter(1000) };
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
  const claim = await claimGuard(deps.guard, ctx.key, seen, {
    ...seen.value,
    state: "sending",
    at: Date.now(),
    worker: deps.worker,
  });
  if (!claim) return { retryInMs: 1000 + jitter(1000) };
  const settled = new Set([...(seen.value.settled ?? []), ...(seen.value.accepted ?? []).map((a) => a.key)]);
  return send(
    ctx,
    claim,
    addressesOf(item).filter((a) => !settled.has(a.key)),
  );
}

const expiryReason = (reason: string | undefined): ExpiryReason =>
  reason === "deadline_before_next_attempt" ? reason : "deadline_passed";
