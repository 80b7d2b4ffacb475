import type { Disposition } from "@notify/bus";
import { moveStatus } from "@notify/db";
import { type Context, done, parkDelay } from "./context.js";

/** The breaker is open: hold the item without spending an attempt, until a probe may go. */
export async function park(ctx: Context): Promise<Disposition> {
  const { deps, item } = ctx;
  const delayMs = parkDelay(deps.gate);
  // Parked again while still parked is no transition; logging it would flood the history.
  if (ctx.row.status !== "parked") {
    await moveStatus(deps.sql, item, "parked", {
      reason: `${deps.gate.provider.name} circuit breaker is open`,
      nextAttemptAt: new Date(Date.now() + delayMs),
    });
  }
  return done(ctx, "parked", { delay_ms: delayMs }, { retryInMs: delayMs });
}
