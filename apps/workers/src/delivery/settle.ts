import type { Disposition } from "@notify/bus";
import { ADDRESS_SUPPRESSED, type DeadLetterClass, type SuppressionHold, suppressionDetail } from "@notify/core";
import { moveStatus } from "@notify/db";
import { type Context, done } from "./context.js";
import { publishDeadLetter } from "./dead-letter.js";

/** A definite failure: dead-lettered with its history, and the channel failed. */
export async function deadLetter(ctx: Context, cls: DeadLetterClass, reason: string, attempts: number): Promise<void> {
  const { deps, item } = ctx;
  await publishDeadLetter(deps.sql, deps.bus, {
    item,
    class: cls,
    reason,
    provider: ctx.gate.provider.name,
    attempts,
  });
  if (await moveStatus(deps.sql, item, "failed", { reason, attempts })) {
    deps.metrics.deadLetters.inc({ channel: item.channel, class: cls });
  }
}

/** The provider may have accepted: shown as unsettled for a receipt to settle, never resent. */
export async function unsettle(ctx: Context, reason: string, attempts: number): Promise<void> {
  const { deps, item } = ctx;
  const provider = ctx.gate.provider.name;
  await publishDeadLetter(deps.sql, deps.bus, {
    item,
    class: "outcome_unknown",
    reason,
    provider,
    attempts,
  });
  // The provider that may have it, for whoever settles it (its receipt, or an operator).
  if (await moveStatus(deps.sql, item, "unsettled", { reason, attempts, provider })) {
    deps.metrics.deadLetters.inc({ channel: item.channel, class: "outcome_unknown" });
  }
}

/**
 * Its address is on the suppression list (its guard already says so): the channel is
 * suppressed, its history naming the entry when it was read with the item; acked, never
 * dead-lettered.
 */
export async function suppressed(
  ctx: Context,
  attempts: number,
  entry: SuppressionHold | undefined,
): Promise<Disposition> {
  const { deps, item } = ctx;
  const detail = entry ? suppressionDetail(entry) : null;
  await moveStatus(deps.sql, item, "suppressed", { reason: ADDRESS_SUPPRESSED, detail, attempts });
  return done(ctx, "suppressed", { attempt: attempts, reason: ADDRESS_SUPPRESSED, entry: detail }, { ack: true });
}
