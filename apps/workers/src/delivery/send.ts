import { type Disposition, type GuardEntry, settleGuard } from "@notify/bus";
import { type AddressResult, type ChannelStatus, countAttempt, decideDelivery, parkDelayMs } from "@notify/core";
import { moveStatus, recordAttempt, removePushSubscription } from "@notify/db";
import type { OutboundMessage } from "@notify/providers";
import { SpanKind, SpanStatusCode, tracingOn, withSpan } from "@notify/telemetry";
import type { Address } from "./addresses.js";
import { type Context, done } from "./context.js";
import { endAtDeadline } from "./expire.js";
import { deadLetter, unsettle } from "./settle.js";

/**
 * Sends under a claim. `headers` (the same for every provider the email may go through, SendGrid
 * and the SMTP failover alike) are made before the claim: nothing that can fail for want of a
 * database may come between a claim and the provider's call, or a send never made would be left
 * claimed and shown unsettled.
 */
export async function send(
  ctx: Context,
  claim: GuardEntry,
  addresses: Address[],
  headers: Record<string, string> | null,
): Promise<Disposition> {
  const { deps, item, row } = ctx;
  const gate = ctx.gate;
  const results = await Promise.all(
    addresses.map(async (address) => {
      const message = {
        notificationId: item.notification_id,
        channel: item.channel,
        to: address.to,
        subject: item.subject,
        body: item.body,
        category: item.category,
        priority: item.priority,
        deliverBy: item.deliver_by ?? null,
        ...(headers === null ? {} : { headers }),
      };
      const result = tracingOn() ? await tracedSend(gate, message, claim.value.attempt) : await gate.send(message);
      return { key: address.key, address, result };
    }),
  );
  await removeGoneSubscriptions(ctx, results);

  const { attempted, attempt, attemptsUsed } = countAttempt({
    results,
    claimed: claim.value.attempt,
    recorded: row.attempts,
    attemptsBeforeReplay: row.attempts_before_replay,
  });
  const decision = decideDelivery({
    results,
    earlierAccepted: claim.value.accepted ?? [],
    earlierSettled: claim.value.settled ?? [],
    attemptsUsed,
    maxAttempts: deps.maxAttempts,
    retryBaseMs: deps.retryBaseMs,
    retryMaxMs: deps.retryMaxMs,
    parkMs: parkDelayMs([gate.breaker.retryInMs()], deps.random),
    deliverByMs: item.deliver_by ? Date.parse(item.deliver_by) : null,
    now: Date.now(),
    random: deps.random,
  });
  const provider = gate.provider.name;
  const base = { attempt, worker: deps.worker, at: Date.now(), provider };
  const tried = { attempt, provider: attempted ? provider : null, ...summarize(results) };

  switch (decision.action) {
    case "delivered": {
      // Written together: whichever lands, a redelivery sends nothing again. The status says
      // delivered (the item is skipped), or the guard says sent (the status is reconciled from
      // it); with neither, as for a worker gone before either, the claim outlives its lifetime
      // and the send is shown unsettled. The provider's receipts, often on their way already,
      // find the send recorded under its provider id a round trip sooner.
      const [guardWrite, statusWrite] = await Promise.allSettled([
        settleGuard(deps.guard, ctx.key, { ...base, state: "sent", provider_id: decision.providerId }),
        moveStatus(deps.sql, item, "delivered", {
          provider,
          providerId: decision.providerId,
          reason: decision.reason,
          attempts: attempt,
          attempt: tried,
        }),
      ]);
      if (guardWrite.status === "rejected" && statusWrite.status === "rejected") {
        // Neither landed: the redelivery finds the claim, and shows the send unsettled once it has outlived it.
        ctx.log.error({ err: guardWrite.reason }, "send guard not marked sent and the delivery not recorded");
      }
      // Without the status the guard is what a redelivery finishes from.
      if (statusWrite.status === "rejected") throw statusWrite.reason;
      if (guardWrite.status === "rejected") {
        ctx.log.warn(
          { err: guardWrite.reason },
          "send guard not marked sent; the delivery is recorded in the database",
        );
      }
      return done(
        ctx,
        "delivered",
        { attempt, provider_id: decision.providerId, reason: decision.reason },
        { ack: true },
      );
    }
    case "expire":
    case "delivered_at_deadline":
      // The next attempt would come too late: nothing more is sent, and the run ends now.
      return endAtDeadline(ctx, decision, attempt, attempted ? tried : undefined);
    case "retry":
    case "park": {
      // A definite refusal (or no call at all): the next attempt may claim the guard and send.
      await settleGuard(deps.guard, ctx.key, {
        ...base,
        state: "failed",
        reason: decision.reason,
        accepted: decision.accepted,
        settled: decision.settled,
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

/**
 * A provider call inside a CLIENT span `<provider> send` (the child of the work item's consumer
 * span): provider, channel, attempt, and the classified outcome with its reason or provider id.
 */
function tracedSend(gate: Context["gate"], message: OutboundMessage, attempt: number): Promise<AddressResult> {
  return withSpan(
    `${gate.provider.name} send`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "notify.provider": gate.provider.name,
        "notify.channel": message.channel,
        "notify.attempt": attempt,
        "notify.notification_id": message.notificationId,
      },
    },
    async (span) => {
      const result = await gate.send(message);
      span?.setAttribute("notify.outcome", result.kind);
      if (result.kind === "accepted") span?.setAttribute("notify.provider_id", result.providerId);
      else {
        span?.setAttribute("notify.reason", result.reason);
        if (result.kind !== "skipped") span?.setStatus({ code: SpanStatusCode.ERROR, message: result.reason });
      }
      return result;
    },
  );
}

/** Subscriptions the push service reported gone are removed from the user (RFC 8030). */
async function removeGoneSubscriptions(
  ctx: Context,
  results: Array<{ address: Address; result: AddressResult }>,
): Promise<void> {
  for (const { address, result } of results) {
    if (result.kind !== "gone" || address.endpoint === null) continue;
    if (await removePushSubscription(ctx.deps.sql, ctx.item.user_id, address.endpoint)) {
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
