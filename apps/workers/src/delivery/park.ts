import type { Disposition } from "@notify/bus";
import type { ProviderDecision } from "@notify/core";
import { moveStatus } from "@notify/db";
import { type Context, done } from "./context.js";

/** Every provider's breaker is open: the item is held without spending an attempt, as the policy says. */
export async function park(
  ctx: Context,
  decision: Extract<ProviderDecision, { action: "park" }>,
): Promise<Disposition> {
  const { deps, item } = ctx;
  // Parked again while still parked is no transition; logging it would flood the history.
  if (ctx.row.status !== "parked") {
    await moveStatus(deps.sql, item, "parked", {
      reason: decision.reason,
      nextAttemptAt: new Date(Date.now() + decision.delayMs),
    });
  }
  return done(ctx, "parked", { delay_ms: decision.delayMs }, { retryInMs: decision.delayMs });
}
