import type { Bus, Disposition, KV } from "@notify/bus";
import { type ChannelStatus, type DeadLetterClass, type GuardValue, guardKey, type WorkItem } from "@notify/core";
import type { Sql } from "@notify/db";
import type { Logger } from "@notify/log";
import type { DeliveryMetrics } from "../metrics.js";
import type { ProviderGate } from "../providers/gate.js";
import { LimiterClosed } from "../providers/rate-limiter.js";
import { type Address, addressesOf } from "./addresses.js";
import { publishDeadLetter } from "./dead-letter.js";
import { claimGuard, type GuardEntry, isClaimable, readGuard, settleGuard } from "./guard.js";
import { type AddressResult, decide } from "./outcome.js";
import { type ChannelRow, loadChannel, moveStatus, recordAttempt, SENDABLE } from "./status.js";
import { removeSubscription } from "./subscriptions.js";

export interface DeliverDeps {
  /** Postgres of this item's lane: transactional has a pool of its own (invariant 4). */
  sql: Sql;
  bus: Bus;
  guard: KV;
  /** The provider of the pool's channel, behind its breaker and token buckets. */
  gate: ProviderGate;
  log: Logger;
  metrics: DeliveryMetrics;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /**
   * A claim still `sending` after this long belongs to a worker that died mid-send: longer
   * than any provider call may take, plus the writes that follow it.
   */
  claimTtlMs: number;
  /** host:pid, written into claims for operators. */
  worker: string;
}

interface Context {
  deps: DeliverDeps;
  item: WorkItem;
  row: ChannelRow;
  key: string;
  log: Logger;
  started: number;
  waitedMs: number;
}

const jitter = (ms: number) => Math.floor(Math.random() * ms);

/**
 * Delivers one work item (spec rules 9, 10, 12, 13; invariants 2, 3, 6, 7):
 * breaker -> token bucket -> send guard -> provider -> guard, attempt, status, dead letter.
 *
 * The send guard is claimed atomically before the provider is called, and says afterwards what
 * happened; it is written before anything else, so a worker that dies at any point leaves a
 * guard from which a redelivery finishes the job without a second send: `sent` is reconciled to
 * delivered, `dead` and `unknown` are dead-lettered again (the msg id makes that a no-op), and a
 * claim left `sending` past its lifetime is shown as unsettled, never resent.
 */
export async function deliver(deps: DeliverDeps, item: WorkItem): Promise<Disposition> {
  const started = performance.now();
  const row = await loadChannel(deps.sql, item);
  if (!row) return { terminate: "no channel row for this work item" };
  const log = deps.log.child({ notification_id: item.notification_id, channel: item.channel, lane: item.priority });
  if (!SENDABLE.includes(row.status)) {
    deps.metrics.outcomes.inc({ channel: item.channel, lane: item.priority, status: "skipped" });
    log.debug({ status: row.status }, "already settled; not sent");
    return { ack: true };
  }
  const ctx: Context = {
    deps,
    item,
    row,
    key: guardKey(item.notification_id, item.channel),
    log,
    started,
    waitedMs: 0,
  };
  try {
    // Two tries: a claim lost to a concurrent duplicate is looked at once more.
    for (let tries = 0; tries < 2; tries++) {
      if (deps.gate.breaker.state() === "open") return await park(ctx);
      // A first attempt almost always finds no guard: claim it straight away (a create, which
      // fails if one exists after all), saving a read on the hot path.
      const first = tries === 0 && row.attempts === 0 && row.status === "pending";
      const seen = first ? null : await readGuard(deps.guard, ctx.key);
      if (!isClaimable(seen)) return await resume(ctx, seen as GuardEntry);
      const settled = new Set([...(seen?.value.settled ?? []), ...(seen?.value.accepted ?? []).map((a) => a.key)]);
      const addresses = addressesOf(item).filter((a) => !settled.has(a.key));
      ctx.waitedMs += await deps.gate.limiter.acquire(item.priority, addresses.length);
      const claim = await claimGuard(deps.guard, ctx.key, seen, {
        state: "sending",
        at: Date.now(),
        attempt: row.attempts + 1,
        worker: deps.worker,
        ...(seen?.value.accepted ? { accepted: seen.value.accepted } : {}),
        ...(seen?.value.settled ? { settled: seen.value.settled } : {}),
      });
      if (claim) return await send(ctx, claim, addresses);
    }
    return { retryInMs: 1000 + jitter(1000) };
  } catch (error) {
    // Shutting down while waiting for a token: nothing was sent; another worker takes it.
    if (error instanceof LimiterClosed) return { retryInMs: 0 };
    throw error;
  } finally {
    if (ctx.waitedMs > 0) {
      const labels = { provider: deps.gate.provider.name, lane: item.priority };
      deps.metrics.rateWaits.inc(labels);
      deps.metrics.rateWaitSeconds.observe(labels, ctx.waitedMs / 1000);
    }
  }
}

/** The breaker is open: hold the item without spending an attempt, until a probe may go. */
async function park(ctx: Context): Promise<Disposition> {
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

const parkDelay = (gate: ProviderGate) => gate.breaker.retryInMs() + 1000 + jitter(1000);

/** Someone holds or held the claim: finish what it says, never send again. */
async function resume(ctx: Context, seen: GuardEntry): Promise<Disposition> {
  const { deps, item } = ctx;
  const guard = seen.value;
  switch (guard.state) {
    case "sent":
      // The provider accepted but the status write was lost: reconcile from the guard.
      await moveStatus(deps.sql, item, "delivered", {
        provider: deps.gate.provider.name,
        providerId: guard.provider_id ?? null,
        attempts: guard.attempt,
      });
      return done(ctx, "delivered", { reconciled: true, provider_id: guard.provider_id }, { ack: true });
    case "dead":
      await deadLetter(ctx, guard.class ?? "permanent", guard.reason ?? "dead-lettered", guard.attempt);
      return done(ctx, "failed", { reconciled: true, reason: guard.reason }, { ack: true });
    case "unknown":
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
      if (deps.gate.provider.idempotent) return await retake(ctx, seen);
      const reason = `worker ${guard.worker ?? "?"} stopped after the provider call began; the provider may have accepted`;
      const unknown: GuardValue = { ...guard, state: "unknown", at: Date.now(), reason };
      if (!(await claimGuard(deps.guard, ctx.key, seen, unknown))) return { retryInMs: 1000 + jitter(1000) };
      await recordAttempt(deps.sql, item, {
        attempt: guard.attempt,
        outcome: "unknown",
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

async function send(ctx: Context, claim: GuardEntry, addresses: Address[]): Promise<Disposition> {
  const { deps, item, row } = ctx;
  const gate = deps.gate;
  const results = await Promise.all(
    addresses.map(async (address) => {
      const result = await gate.send({
        notificationId: item.notification_id,
        channel: item.channel,
        to: address.to,
        subject: item.subject,
        body: item.body,
        category: item.category,
        priority: item.priority,
      });
      return { key: address.key, address, result };
    }),
  );
  await removeGoneSubscriptions(ctx, results);

  const attempted = results.some(({ result }) => result.kind !== "skipped");
  const attempt = attempted ? claim.value.attempt : row.attempts;
  const decision = decide({
    results,
    earlierAccepted: claim.value.accepted ?? [],
    attemptsUsed: attempt - row.attempts_before_replay,
    maxAttempts: deps.maxAttempts,
    retryBaseMs: deps.retryBaseMs,
    retryMaxMs: deps.retryMaxMs,
    parkMs: parkDelay(gate),
  });
  const base = { attempt, worker: deps.worker, at: Date.now() };
  const provider = gate.provider.name;
  const tried = { attempt, ...summarize(results) };

  switch (decision.action) {
    case "delivered": {
      await settleGuard(deps.guard, ctx.key, { ...base, state: "sent", provider_id: decision.providerId });
      await moveStatus(deps.sql, item, "delivered", {
        provider,
        providerId: decision.providerId,
        reason: decision.reason,
        attempts: attempt,
        attempt: tried,
      });
      return done(
        ctx,
        "delivered",
        { attempt, provider_id: decision.providerId, reason: decision.reason },
        { ack: true },
      );
    }
    case "retry":
    case "park": {
      // A definite refusal (or no call at all): the next attempt may claim the guard and send.
      await settleGuard(deps.guard, ctx.key, {
        ...base,
        state: "failed",
        reason: decision.reason,
        accepted: decision.accepted,
        settled: [...new Set([...(claim.value.settled ?? []), ...decision.settled])],
      });
      const status: ChannelStatus = decision.action === "retry" ? "retrying" : "parked";
      if (attempted || row.status !== status) {
        await moveStatus(deps.sql, item, status, {
          reason: decision.reason,
          attempts: attempt,
          nextAttemptAt: new Date(Date.now() + decision.delayMs),
          ...(attempted ? { attempt: tried } : {}),
        });
      }
      if (decision.action === "retry") deps.metrics.retries.inc({ provider, channel: item.channel });
      return done(
        ctx,
        status,
        { attempt, reason: decision.reason, delay_ms: decision.delayMs },
        {
          retryInMs: decision.delayMs,
        },
      );
    }
    case "dead_letter": {
      await settleGuard(deps.guard, ctx.key, {
        ...base,
        state: "dead",
        class: decision.class,
        reason: decision.reason,
      });
      // Recorded before the dead letter is published: the letter carries every attempt.
      await recordAttempt(deps.sql, item, tried);
      await deadLetter(ctx, decision.class, decision.reason, attempt);
      return done(ctx, "failed", { attempt, class: decision.class, reason: decision.reason }, { ack: true });
    }
    case "unsettled": {
      await settleGuard(deps.guard, ctx.key, { ...base, state: "unknown", reason: decision.reason });
      await recordAttempt(deps.sql, item, tried);
      await unsettle(ctx, decision.reason, attempt);
      return done(ctx, "unsettled", { attempt, reason: decision.reason }, { ack: true });
    }
  }
}

/** Subscriptions the push service reported gone are removed from the user (RFC 8030). */
async function removeGoneSubscriptions(
  ctx: Context,
  results: Array<{ address: Address; result: AddressResult }>,
): Promise<void> {
  for (const { address, result } of results) {
    if (result.kind !== "gone" || address.endpoint === null) continue;
    if (await removeSubscription(ctx.deps.sql, ctx.item.user_id, address.endpoint)) {
      ctx.deps.metrics.subscriptionsRemoved.inc();
      ctx.log.info({ reason: result.reason }, "push subscription gone; removed from the user's device tokens");
    }
  }
}

/** One attempt's line in delivery_attempts: one address maps through; several are counted. */
function summarize(results: Array<{ result: AddressResult }>): {
  outcome: string;
  providerId: string | null;
  error: string | null;
} {
  const counts = new Map<string, number>();
  for (const { result } of results) counts.set(result.kind, (counts.get(result.kind) ?? 0) + 1);
  const accepted = results.find(({ result }) => result.kind === "accepted")?.result;
  const errors = results.flatMap(({ result }) => ("reason" in result ? [result.reason] : []));
  return {
    outcome:
      results.length === 1
        ? (results[0] as { result: AddressResult }).result.kind
        : [...counts].map(([k, n]) => `${k}:${n}`).join(","),
    providerId: accepted?.kind === "accepted" ? accepted.providerId : null,
    error: errors.length > 0 ? [...new Set(errors)].join("; ") : null,
  };
}

async function deadLetter(ctx: Context, cls: DeadLetterClass, reason: string, attempts: number): Promise<void> {
  const { deps, item } = ctx;
  await publishDeadLetter(deps.sql, deps.bus, {
    item,
    class: cls,
    reason,
    provider: deps.gate.provider.name,
    attempts,
  });
  if (await moveStatus(deps.sql, item, "failed", { reason, attempts })) {
    deps.metrics.deadLetters.inc({ channel: item.channel, class: cls });
  }
}

/** The provider may have accepted: shown as unsettled for a receipt to settle, never resent. */
async function unsettle(ctx: Context, reason: string, attempts: number): Promise<void> {
  const { deps, item } = ctx;
  await publishDeadLetter(deps.sql, deps.bus, {
    item,
    class: "outcome_unknown",
    reason,
    provider: deps.gate.provider.name,
    attempts,
  });
  if (await moveStatus(deps.sql, item, "unsettled", { reason, attempts })) {
    deps.metrics.deadLetters.inc({ channel: item.channel, class: "outcome_unknown" });
  }
}

/** The one log line and outcome count of a handled item (a wide event: STYLE). */
function done(
  ctx: Context,
  status: ChannelStatus | "skipped",
  fields: Record<string, unknown>,
  disposition: Disposition,
): Disposition {
  const { deps, item } = ctx;
  deps.metrics.outcomes.inc({ channel: item.channel, lane: item.priority, status });
  const line = {
    ...fields,
    status,
    provider: deps.gate.provider.name,
    waited_ms: Math.round(ctx.waitedMs),
    ms: Math.round(performance.now() - ctx.started),
  };
  if (status === "delivered") ctx.log.info(line, "delivered");
  else if (status === "skipped") ctx.log.debug(line, "claim held by another worker; looking again later");
  // A parked item is looked at again every few seconds while the breaker stays open.
  else if (status === "parked" && ctx.row.status === "parked") ctx.log.debug(line, "still parked");
  else ctx.log.warn(line, status === "parked" ? "provider breaker open; parked" : `not delivered: ${status}`);
  return disposition;
}
