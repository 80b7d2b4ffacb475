import {
  capDay,
  countsTowardCap,
  type LaneMessage,
  type PolicyInput,
  throttleOutcome,
  type WorkItem,
} from "@notify/core";
import { listPendingChannels, recordRoutedChannels, settlePendingChannel } from "@notify/db";
import { contextOf, tracingOn, withSpan } from "@notify/telemetry";
import { joinDigestItem } from "../digests/join.js";
import type { UserProfile } from "../preferences/profiles.js";
import { buildItem, decideAndPlan, overCap, type Planned, type RouteDeps } from "./plan.js";
import { overThrottle, throttleLimit } from "./throttle.js";

/**
 * `passed`: routed while the user's previous notification in the lane, looked for, was still
 * unrouted (warned); `held`: nothing done, it waits for that one.
 */
export type RouteOutcome = "routed" | "passed" | "duplicate" | "gone" | "held";

export interface RouteOptions {
  /**
   * The user's previous notification in the lane, when it is not routed yet: "hold" writes
   * nothing and answers "held" (the lane consumer, for a message whose delivery order is in doubt
   * and that can come back); "report" routes and warns (the reconciler, which routes what the
   * lane lost, and a message held for its whole budget). Not looked for without it.
   */
  order?: "hold" | "report";
}

/**
 * The processing stage for one lane message: preferences and policy, rendering,
 * the daily cap, routing. Every channel's outcome is recorded: pending (queued for its
 * worker), suppressed with a reason, deferred with the planned time, or failed when the
 * template cannot render.
 *
 * Safe to run twice for one notification, whatever crashed where: the channel rows, the cap
 * slot and the deferral timer are written together, and only by the first run (the rows'
 * primary key, ON CONFLICT DO NOTHING); a later run publishes a work item for every channel
 * still pending, with the msg id `<notification>:<channel>` that JetStream deduplicates; the
 * worker's send guard covers the rest.
 */
export async function routeNotification(
  deps: RouteDeps,
  message: LaneMessage,
  options: RouteOptions = {},
): Promise<RouteOutcome> {
  // A digest's item joins its digest; one whose throttle folds only what is over the limit into
  // the digest is routed alone while under it.
  if (message.digest && message.throttle?.over_limit !== "digest") return joinDigestItem(deps, message);
  const { input, profile, planned: decided } = await decideAndPlan(deps, message, message.channels);
  const recorded = await record(deps, message, input, decided, options);
  // The row was removed by ingest's compensation (its publish failed): nothing to route.
  if (recorded.gone) return "gone";
  const { first, planned, held, earlier } = recorded;
  if (held) return "held";
  // Over its throttle with `over_limit: "digest"`: its own channels are suppressed (throttled)
  // and it joins its digest. The outcome is recorded before, so a redelivery (after a crash in
  // between) finds it throttled and joins again, which joins nothing twice.
  if (message.digest && throttleOutcome(message.throttle, recorded.throttled) === "digest")
    await joinDigestItem(deps, message);
  if (first && earlier !== null)
    deps.log.warn(
      { notification_id: message.notification_id, earlier },
      "routed before the user's previous notification, which has not come back",
    );
  if (first)
    await publish(
      deps,
      message,
      planned.flatMap((p) => (p.status === "pending" ? [p.item] : [])),
    );
  else await publishPending(deps, message, planned, profile);
  // The line's fields are built only when it is written.
  if (deps.log.isLevelEnabled("debug"))
    deps.log.debug(
      {
        notification_id: message.notification_id,
        first,
        planned: planned.map(({ channel, status, reason, nextAttemptAt }) => ({
          channel,
          status,
          reason,
          nextAttemptAt,
        })),
      },
      "routed",
    );
  if (!first) return "duplicate";
  return earlier === null ? "routed" : "passed";
}

/**
 * routeNotification inside a `notification route` span (with tracing on; otherwise it only
 * routes): the child of the active span (the lane message's consumer span), or of the span a
 * stored traceparent names (the reconciler routing a notification whose lane message was lost).
 * The work items are published inside it, so each carries it as their parent.
 */
export function routeTraced(
  deps: RouteDeps,
  message: LaneMessage,
  options: RouteOptions = {},
  storedTraceParent?: string | null,
): Promise<RouteOutcome> {
  if (!tracingOn()) return routeNotification(deps, message, options);
  return withSpan(
    "notification route",
    {
      ...(storedTraceParent === undefined ? {} : { parent: contextOf(storedTraceParent) }),
      attributes: {
        "notify.notification_id": message.notification_id,
        "notify.priority": message.priority,
        "notify.template_id": message.template_id,
      },
    },
    async (span) => {
      const outcome = await routeNotification(deps, message, options);
      span?.setAttribute("notify.outcome", outcome);
      return outcome;
    },
  );
}

interface Recorded {
  first: boolean;
  held: boolean;
  /** Over its throttle (this run's decision or the recorded one's). */
  throttled: boolean;
  earlier: string | null;
  planned: Planned[];
  /** The notification is not in the log: nothing was written. */
  gone: boolean;
}

/**
 * Writes the channel outcomes, and the deferral timer with them, unless an earlier run did
 * (even one that chose other channels: the user's reachable channels may have changed since).
 * Without a cap or a throttle this is one statement. With one it is a transaction: the slots are
 * taken only by the run whose rows went in, and a crash undoes all of it. The throttle is taken
 * when something would be sent now, before the cap (a throttled notification does not spend the
 * user's daily cap).
 */
async function record(
  deps: RouteDeps,
  message: LaneMessage,
  input: PolicyInput,
  decided: Planned[],
  options: RouteOptions,
): Promise<Recorded> {
  const cap = input.preferences.rateCapPerDay;
  const sending = decided.some((p) => p.status === "pending");
  const { first, capped, throttled, held, earlier, gone } = await recordRoutedChannels(deps.database, {
    notificationId: message.notification_id,
    clientId: message.client_id,
    userId: message.user_id,
    priority: message.priority,
    ...(options.order ? { order: options.order } : {}),
    channels: decided,
    deferredUntil: decided.find((p) => p.status === "deferred")?.nextAttemptAt ?? null,
    cap:
      cap === null || !countsTowardCap(input, sending)
        ? null
        : { userId: message.user_id, day: capDay(input.now, input.preferences), cap },
    throttle: throttleLimit(message.throttle, input.now),
  });
  const planned = throttled ? overThrottle(decided) : capped ? overCap(decided) : decided;
  return { first, held, throttled, earlier, planned, gone: gone === true };
}

const publish = (deps: RouteDeps, message: LaneMessage, items: readonly WorkItem[]) =>
  Promise.all(
    items.map((item) =>
      deps.bus.publish(
        deps.bus.subjects.work(item.channel, message.priority),
        item,
        `${message.notification_id}:${item.channel}`,
      ),
    ),
  );

/**
 * Publishes a work item for every channel recorded as pending. On a redelivery the recorded
 * outcome wins over this run's (preferences may have changed since): a channel the first run
 * queued is built again from its pinned template version.
 */
async function publishPending(
  deps: RouteDeps,
  message: LaneMessage,
  planned: readonly Planned[],
  profile: UserProfile,
): Promise<void> {
  const pending = await listPendingChannels(deps.database, message.notification_id);
  const items: WorkItem[] = [];
  for (const channel of pending) {
    const mine = planned.find((p) => p.channel === channel);
    const outcome = mine?.status === "pending" ? mine : await buildItem(deps, message, profile, channel);
    if (outcome.status === "pending") items.push(outcome.item);
    else {
      await settlePendingChannel(
        deps.database,
        { notification_id: message.notification_id, channel },
        outcome.status,
        outcome.reason,
      );
    }
  }
  await publish(deps, message, items);
}
