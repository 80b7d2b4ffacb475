import { type Bus, oldestOnSubject } from "@notify/bus";
import type { Priority } from "@notify/core";
import {
  type Database,
  findUnroutedNotifications,
  findWaitingChannels,
  readSweepPosition,
  saveSweepPosition,
  settleInAppFromInbox,
  settleWaitingChannel,
  touchWaitingChannel,
  type WaitingChannel,
  withSweepLock,
} from "@notify/db";
import type { Logger } from "@notify/log";
import { contextOf, withContext } from "@notify/telemetry";
import { every, type Leader, type Periodic } from "../periodic.js";
import { buildItem, type RouteDeps } from "../routing/plan.js";
import { routeTraced } from "../routing/route.js";
import { idFloor } from "./ids.js";

/** What one round found and drove on, by kind. */
export interface Found {
  /** Accepted, not routed, and its lane message gone. */
  unrouted: number;
  /**
   * Routed (or released, or retried) but its work item gone: published again, or suppressed when
   * its address is not to be sent to any more.
   */
  unsent: number;
  /** In-app sends left unsettled whose item is in the inbox. */
  in_app_unsettled: number;
}
export const FOUND_KINDS = ["unrouted", "unsent", "in_app_unsettled"] as const;

export interface ReconcilerDeps {
  /** Routing of each lane: the normal path the reconciler drives stalled work through. */
  lanes: Record<Priority, RouteDeps>;
  database: Database;
  bus: Bus;
  log: Logger;
  onFound(kind: keyof Found, count: number): void;
}

export interface ReconcilerOptions {
  /** How long work may sit unchanged before it counts as stalled. */
  afterMs: number;
  /** How far back the scan of notifications starts the first time, or after a long stop. */
  lookbackMs: number;
  /** Notifications read per chunk of the scan, and chunks per round at most. */
  chunk?: number;
  chunksPerRound?: number;
  /** Stalled channels handled per round at most. */
  channelsPerRound?: number;
  now?: () => number;
}

const LOCK = "notify.reconciler";
const POSITION = "reconciler.notifications";
/** A message is published this long after its row is written, at most, in the normal course. */
const PUBLISH_SLACK_MS = 5000;

/**
 * One round of the reconciler, run by one instance at a time across the deployment (an
 * advisory lock; answers undefined when another instance holds it). It finds work that has
 * stayed where it is for longer than `afterMs` although nothing is left in NATS to move it on,
 * and drives it through the normal path with the normal ids and send guards, so no provider is
 * ever called twice:
 *
 * - accepted but not routed (its lane message gone): routed now, as the lane consumer would;
 * - routed, released from quiet hours or retried, but never sent (its work item gone): the work
 *   item is published again (a worker's send guard makes any repeat harmless), or, when its
 *   address has gone on the suppression list (or gone) since routing, the channel is suppressed
 *   as routing would suppress it now;
 * - in-app sends left unsettled by a worker that died mid-store: settled from the inbox.
 *
 * Whether a message is gone is read from the stream itself: a work-queue stream keeps a message
 * until it is acknowledged, so when the oldest message on the subject was published after the
 * work's last change, its message is no longer there. A subject with an older message still
 * waiting is backed up rather than stalled, and is left alone until it drains.
 *
 * Email and SMS sends left unsettled (a worker died after calling the provider) are settled by
 * the provider's receipt when it comes; push has no receipts, so those stay unsettled: a second
 * send would risk a duplicate.
 */
export async function reconcile(deps: ReconcilerDeps, options: ReconcilerOptions): Promise<Found | undefined> {
  return withSweepLock(deps.database, LOCK, async () => {
    const found: Found = { unrouted: 0, unsent: 0, in_app_unsettled: 0 };
    const now = (options.now ?? Date.now)();
    const before = now - options.afterMs;
    const oldest = oldestOnce(deps.bus);
    found.unrouted = await unrouted(deps, options, oldest, now, before);
    found.unsent = await unsent(deps, options, oldest, before);
    found.in_app_unsettled = await settleInAppFromInbox(deps.database, new Date(before), 500);
    for (const kind of FOUND_KINDS) if (found[kind] > 0) deps.onFound(kind, found[kind]);
    if (found.unrouted + found.unsent + found.in_app_unsettled > 0)
      deps.log.warn(found, "reconciler drove stalled work on");
    return found;
  });
}

/** The time of the oldest message on each subject, read once per round. */
function oldestOnce(bus: Bus) {
  const seen = new Map<string, Promise<Date | null>>();
  return (stream: string, subject: string): Promise<Date | null> => {
    const key = `${stream} ${subject}`;
    let time = seen.get(key);
    if (!time) {
      time = oldestOnSubject(bus, stream, subject);
      seen.set(key, time);
    }
    return time;
  };
}

/** Whether a message published at `since` (or up to the slack after it) may still be on the subject. */
const mayBeQueued = (oldest: Date | null, since: number) =>
  oldest !== null && oldest.getTime() <= since + PUBLISH_SLACK_MS;

async function unrouted(
  deps: ReconcilerDeps,
  options: ReconcilerOptions,
  oldest: ReturnType<typeof oldestOnce>,
  now: number,
  before: number,
): Promise<number> {
  const floor = idFloor(now - options.lookbackMs);
  const stored = await readSweepPosition(deps.database, POSITION, floor);
  // biome-ignore lint/complexity/useMathMinMax: ids are text, compared as text, not as numbers
  let position = stored < floor ? floor : stored;
  let routed = 0;
  for (let chunk = 0; chunk < (options.chunksPerRound ?? 20); chunk++) {
    const { unrouted, last } = await findUnroutedNotifications(deps.database, {
      from: position,
      before: idFloor(before),
      limit: options.chunk ?? 5000,
    });
    if (last === null) break;
    let blocked: string | null = null;
    for (const n of unrouted) {
      const { priority } = n.message;
      const since = await oldest(deps.bus.streams.lane(priority), deps.bus.subjects.lane(priority, n.partition));
      if (mayBeQueued(since, n.createdAt.getTime())) {
        blocked ??= n.message.notification_id;
        continue;
      }
      const outcome = await routeTraced(deps.lanes[priority], n.message, { order: "report" }, n.traceParent);
      deps.log.info(
        { notification_id: n.message.notification_id, outcome },
        "reconciler routed a notification whose lane message was gone",
      );
      routed++;
    }
    // The scan goes on from the first notification that may still be queued, or past the chunk.
    const next = blocked ?? last;
    if (next === position) break;
    position = next;
    if (blocked !== null) break;
  }
  if (position !== stored) await saveSweepPosition(deps.database, POSITION, position);
  return routed;
}

async function unsent(
  deps: ReconcilerDeps,
  options: ReconcilerOptions,
  oldest: ReturnType<typeof oldestOnce>,
  before: number,
): Promise<number> {
  const waiting = await findWaitingChannels(deps.database, {
    before: new Date(before),
    limit: options.channelsPerRound ?? 500,
  });
  let driven = 0;
  for (const w of waiting) {
    const { priority } = w.message;
    const since = await oldest(deps.bus.streams.work, deps.bus.subjects.work(w.channel, priority));
    const changed = Math.max(w.updatedAt.getTime(), w.nextAttemptAt?.getTime() ?? 0);
    if (mayBeQueued(since, changed)) continue;
    if (await redrive(deps, w)) driven++;
  }
  return driven;
}

/**
 * Publishes a stalled channel's work item again, rebuilt as routing builds it. The row is
 * touched first (only if it is still as found), so the item is newer than its row's last change
 * and a later round leaves it alone while it waits; its msg id names that change, so two rounds
 * never publish it twice. A channel whose address routing would not send to now (on the
 * suppression list for the notification's client, or gone) is suppressed instead, with the
 * reason routing gives and the entry in its history, so it ends and its notification completes.
 */
async function redrive(deps: ReconcilerDeps, w: WaitingChannel): Promise<boolean> {
  const lane = deps.lanes[w.message.priority];
  const profile = await lane.profiles.load(w.message.user_id);
  const planned = await buildItem(lane, w.message, profile, w.channel);
  if (planned.status === "suppressed") {
    const settled = await settleWaitingChannel(deps.database, w, planned);
    if (settled)
      deps.log.info(
        { notification_id: w.message.notification_id, channel: w.channel, status: w.status, reason: planned.reason },
        "reconciler suppressed a stalled channel whose address is not to be sent to",
      );
    return settled;
  }
  if (planned.status !== "pending") {
    deps.log.warn(
      {
        notification_id: w.message.notification_id,
        channel: w.channel,
        status: planned.status,
        reason: planned.reason,
      },
      "reconciler cannot rebuild a stalled work item; left for an operator",
    );
    return false;
  }
  const touched = await touchWaitingChannel(deps.database, w);
  if (touched === null) return false;
  // In the notification's trace (its stored traceparent), when tracing is on.
  await withContext(w.traceParent === null ? undefined : contextOf(w.traceParent), () =>
    deps.bus.publish(
      deps.bus.subjects.work(w.channel, w.message.priority),
      planned.item,
      `${w.message.notification_id}:${w.channel}:redrive:${touched.getTime()}`,
    ),
  );
  deps.log.info(
    { notification_id: w.message.notification_id, channel: w.channel, status: w.status },
    "reconciler published a work item that was gone",
  );
  return true;
}

/** The reconciler every `intervalMs`; a round another instance is running is skipped. */
export function startReconciler(
  deps: ReconcilerDeps,
  options: ReconcilerOptions & { intervalMs: number; leader?: Leader },
): Periodic {
  return every(
    options.intervalMs,
    deps.log,
    "reconciling stalled work",
    async () => {
      await reconcile(deps, options);
    },
    options.leader,
  );
}
