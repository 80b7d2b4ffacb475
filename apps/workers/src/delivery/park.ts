import type { Disposition } from "@notify/bus";
import { moveStatus } from "@notify/db";
import { type Context, done, parkDelay } from "./context.js";

/** Every provider's breaker is open: hold the item without spending an attempt, until a probe may go. */
export async function park(ctx: Context): Promise<Disposition> {
  const { deps, item } = ctx;
  const gates = [deps.gate, ...(deps.failover ?? [])];
  const delayMs = parkDelay(...gates);
  // Parked again while still parked is no transition; logging it would flood the history.
  if (ctx.row.status !== "parked") {
    await moveStatus(deps.sql, item, "parked", {
      reason: `${gates.map((gate) => gate.provider.name).join(" and ")} circuit breaker${gates.length > 1 ? "s are" : " is"} open`,
      nextAttemptAt: new Date(Date.now() + delayMs),
    });
  }
  return done(ctx, "parked", { delay_ms: delayMs }, { retryInMs: delayMs });
}
