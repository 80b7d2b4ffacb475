import { claimGuard, type Disposition, type GuardEntry, isClaimable, readGuard } from "@notify/bus";
import { guardKey, isPastDeadline, runAttempts, SENDABLE, suppressionAddress, type WorkItem } from "@notify/core";
import { loadChannel } from "@notify/db";
import type { Logger } from "@notify/log";
import { LimiterClosed } from "../providers/rate-limiter.js";
import { addressesOf } from "./addresses.js";
import { chooseGate } from "./choose.js";
import { type Context, type DeliverDeps, jitter } from "./context.js";
import { expire } from "./expire.js";
import { park } from "./park.js";
import { resume } from "./resume.js";
import { send } from "./send.js";
import { suppress } from "./suppress.js";

export type { DeliverDeps } from "./context.js";

/**
 * Delivers one work item (invariants 2, 3, 6, 7):
 * suppression list -> breaker -> token bucket -> send guard -> provider -> guard, attempt,
 * status, dead letter.
 *
 * The send guard is claimed atomically before the provider is called, and says afterwards what
 * happened; it is written before anything else (an accepted send's `sent` together with its
 * `delivered` status, which a redelivery reads first), so a worker that dies at any point leaves
 * what a redelivery finishes the job from without a second send: `sent` is reconciled to
 * delivered, `dead` and `unknown` are dead-lettered again (the msg id makes that a no-op), and a
 * claim left `sending` past its lifetime is shown as unsettled, never resent.
 */
export async function deliver(deps: DeliverDeps, item: WorkItem): Promise<Disposition> {
  const started = performance.now();
  // The address about to be sent to, looked up on the suppression list by the same read.
  const address = item.channel === "email" || item.channel === "sms" ? suppressionAddress(item.channel, item.to) : null;
  const row = await loadChannel(deps.sql, {
    notification_id: item.notification_id,
    channel: item.channel,
    user_id: item.user_id,
    address,
  });
  if (!row) return { terminate: "no channel row for this work item" };
  // Made when a line is written: at the levels above info most items write none.
  let log: Logger | undefined;
  const itemLog = () =>
    (log ??= deps.log.child({ notification_id: item.notification_id, channel: item.channel, lane: item.priority }));
  if (!SENDABLE.includes(row.status)) {
    deps.metrics.outcomes.inc({ channel: item.channel, lane: item.priority, status: "skipped" });
    if (deps.log.isLevelEnabled("debug")) itemLog().debug({ status: row.status }, "already settled; not sent");
    return { ack: true };
  }
  const ctx: Context = {
    deps,
    item,
    row,
    gate: deps.gate,
    key: guardKey(item.notification_id, item.channel),
    get log() {
      return itemLog();
    },
    started,
    waitedMs: 0,
  };
  try {
    // Whenever it was routed or however it came back (a replayed dead letter): never sent.
    if (row.suppression) return await suppress(ctx, row.suppression);
    // Two tries: a claim lost to a concurrent duplicate is looked at once more.
    for (let tries = 0; tries < 2; tries++) {
      // Past its deadline nothing is sent; what the guard says (it may have been sent) is read first.
      const late = isPastDeadline(item.deliver_by, Date.now());
      const choice = chooseGate(deps, item.priority, runAttempts(row.attempts, row.attempts_before_replay), late);
      if (choice.action === "park") return await park(ctx, choice);
      ctx.gate = choice.gate;
      // A first attempt almost always finds no guard: claim it straight away (a create, which
      // fails if one exists after all), saving a read on the hot path.
      const first = !late && tries === 0 && row.attempts === 0 && row.status === "pending";
      const seen = first ? null : await readGuard(deps.guard, ctx.key);
      // This process's own claim whose write answered with a timeout: nothing was sent under it.
      const unused =
        seen !== null && seen.value.worker === deps.worker && deps.unusedClaims.take(ctx.key, seen.value.at);
      if (!unused && !isClaimable(seen)) return await resume(ctx, seen as GuardEntry);
      if (late) return await expire(ctx, seen);
      const settled = new Set([...(seen?.value.settled ?? []), ...(seen?.value.accepted ?? []).map((a) => a.key)]);
      const addresses = addressesOf(item).filter((a) => !settled.has(a.key));
      // Before the claim: a failure here (the unsubscribe key unread while Postgres is away) is
      // retried with nothing claimed.
      const headers = (await deps.unsubscribe?.(item)) ?? null;
      ctx.waitedMs += await ctx.gate.limiter.acquire(item.priority, addresses.length);
      // The wait for a token may have outlasted the deadline: checked again right before the claim.
      if (isPastDeadline(item.deliver_by, Date.now())) return await expire(ctx, seen);
      const at = Date.now();
      const claim = await claimGuard(deps.guard, ctx.key, seen, {
        state: "sending",
        at,
        attempt: row.attempts + 1,
        worker: deps.worker,
        provider: ctx.gate.provider.name,
        ...(seen?.value.accepted ? { accepted: seen.value.accepted } : {}),
        ...(seen?.value.settled ? { settled: seen.value.settled } : {}),
      }).catch((error: unknown) => {
        deps.unusedClaims.remember(ctx.key, at);
        throw error;
      });
      if (claim) return await send(ctx, claim, addresses, headers);
    }
    return { retryInMs: 1000 + jitter(deps, 1000) };
  } catch (error) {
    // Shutting down while waiting for a token: nothing was sent; another worker takes it.
    if (error instanceof LimiterClosed) return { retryInMs: 0 };
    throw error;
  } finally {
    if (ctx.waitedMs > 0) {
      const labels = { provider: ctx.gate.provider.name, lane: item.priority };
      deps.metrics.rateWaits.inc(labels);
      deps.metrics.rateWaitSeconds.observe(labels, ctx.waitedMs / 1000);
    }
  }
}
