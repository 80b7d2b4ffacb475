import { claimGuard, type Disposition, isClaimable, readGuard } from "@notify/bus";
import { ADDRESS_SUPPRESSED, type SuppressionHold } from "@notify/core";
import { type Context, jitter } from "./context.js";
import { resume } from "./resume.js";
import { suppressed } from "./settle.js";

/**
 * The item's address is on the suppression list for its client: it is never sent. What the
 * guard says is read first (an earlier attempt may have sent it, or a worker may be sending it
 * now: that is finished as any held guard is); otherwise its final state is taken by a
 * compare-and-set on what was read, so no worker sends under it afterwards and a duplicate of
 * this item finds it and does the same. The channel follows: suppressed, with the entry in its
 * history; acked, never dead-lettered.
 */
export async function suppress(ctx: Context, entry: SuppressionHold): Promise<Disposition> {
  const { deps, row } = ctx;
  const seen = await readGuard(deps.guard, ctx.key);
  if (!isClaimable(seen) && seen !== null) return resume(ctx, seen);
  const claim = await claimGuard(deps.guard, ctx.key, seen, {
    state: "suppressed",
    at: Date.now(),
    attempt: row.attempts,
    worker: deps.worker,
    provider: ctx.gate.provider.name,
    reason: ADDRESS_SUPPRESSED,
    ...(seen?.value.accepted ? { accepted: seen.value.accepted } : {}),
    ...(seen?.value.settled ? { settled: seen.value.settled } : {}),
  });
  // Changed since it was read: look again, it may be being sent.
  if (claim === null) return { retryInMs: 500 + jitter(deps, 500) };
  return suppressed(ctx, row.attempts, entry);
}
