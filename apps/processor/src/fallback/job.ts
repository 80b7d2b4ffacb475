import { decideFallback, type WorkItem } from "@notify/core";
import {
  endFallback,
  listOpenFallbacks,
  type OpenFallback,
  readFallbackRoutable,
  startFallbackWait,
  takeFallbackStep,
} from "@notify/db";
import { contextOf, withContext } from "@notify/telemetry";
import { every, type Leader, type Periodic } from "../periodic.js";
import { decideAndPlan, type RouteDeps } from "../routing/plan.js";

export interface FallbackRound {
  /** Steps taken: a next channel was routed. */
  taken: number;
  /** Chains ended: the watched channel reached the user, or failed in a way no step covers. */
  ended: number;
  /** Waits for a receipt started. */
  waiting: number;
}

/**
 * One round of channel fallback: for each open chain whose watched channel has an outcome,
 * decides the next step (core `decideFallback`), and takes it: the next channel is routed as
 * any channel is (preferences, quiet hours, its address, the deadline) and recorded together
 * with the chain's move in one transaction, which a second run or another processor cannot
 * repeat; its work item is published after the commit (msg id `<notification>:<channel>`,
 * and the reconciler republishes a pending channel whose publish was lost).
 */
export async function runFallbacks(deps: RouteDeps, limit = 200): Promise<FallbackRound> {
  const now = deps.now();
  const open = await listOpenFallbacks(deps.database, now, limit);
  const round: FallbackRound = { taken: 0, ended: 0, waiting: 0 };
  for (const chain of open) {
    // One chain that cannot be handled (a profile or template read failing) must not hold up the others.
    try {
      await decide(deps, chain, now, round);
    } catch (error) {
      deps.log.warn({ err: error, notification_id: chain.notification_id }, "channel fallback failed; will retry");
    }
  }
  return round;
}

async function decide(deps: RouteDeps, chain: OpenFallback, now: Date, round: FallbackRound): Promise<void> {
  const step = chain.steps[chain.next_step];
  if (step === undefined) {
    await endFallback(deps.database, chain.notification_id, chain.user_id, chain.next_step);
    round.ended++;
    return;
  }
  const due = chain.confirm_by !== null && chain.confirm_by.getTime() <= now.getTime();
  const decision = decideFallback(step, chain, due);
  if (decision.action === "stop") {
    await endFallback(deps.database, chain.notification_id, chain.user_id, chain.next_step);
    round.ended++;
  } else if (decision.action === "wait") {
    if (decision.confirmWithinSeconds !== undefined && chain.confirm_by === null) {
      const until = new Date(now.getTime() + decision.confirmWithinSeconds * 1000);
      await startFallbackWait(deps.database, chain.notification_id, chain.next_step, until);
      round.waiting++;
    }
  } else if (await take(deps, chain, step.channel, decision.because)) round.taken++;
}

async function take(
  deps: RouteDeps,
  chain: OpenFallback,
  channel: OpenFallback["watching"],
  because: Parameters<typeof takeFallbackStep>[1]["because"],
): Promise<boolean> {
  const notification = await readFallbackRoutable(deps.database, chain.notification_id);
  if (notification === null) return false;
  const { planned } = await decideAndPlan(deps, notification, [channel]);
  const next = planned[0];
  if (next === undefined) return false;
  const took = await takeFallbackStep(deps.database, {
    notificationId: chain.notification_id,
    userId: chain.user_id,
    step: chain.next_step,
    from: chain.watching,
    because,
    next: {
      channel,
      status: next.status,
      reason: next.reason,
      nextAttemptAt: next.nextAttemptAt,
      ...(next.status === "suppressed" && next.detail ? { detail: next.detail } : {}),
    },
  });
  if (!took) return false;
  deps.log.info(
    { notification_id: chain.notification_id, from: chain.watching, to: channel, because, status: next.status },
    "channel fallback taken",
  );
  // In the notification's trace (its stored traceparent), when tracing is on.
  if (next.status === "pending")
    await withContext(notification.trace_parent === null ? undefined : contextOf(notification.trace_parent), () =>
      publish(deps, next.item),
    );
  return true;
}

const publish = (deps: RouteDeps, item: WorkItem) =>
  deps.bus.publish(
    deps.bus.subjects.work(item.channel, item.priority),
    item,
    `${item.notification_id}:${item.channel}`,
  );

/** Runs fallback rounds every `intervalMs` (batch after batch while they come back full), on the leading instance. */
export function startFallbacks(deps: RouteDeps, options: { intervalMs: number; leader?: Leader }): Periodic {
  return every(
    options.intervalMs,
    deps.log,
    "taking channel fallbacks",
    async (isStopping) => {
      let round: FallbackRound;
      do round = await runFallbacks(deps);
      while (!isStopping() && round.taken + round.ended >= 200);
    },
    options.leader,
  );
}
