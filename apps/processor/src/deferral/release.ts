import { capDay, countsTowardCap, type LaneMessage, type Priority, type WorkItem } from "@notify/core";
import {
  type DueDeferral,
  type DuePosition,
  joinedDigest,
  listDueDeferrals,
  type ReleasedChannel,
  releaseDeferrals,
} from "@notify/db";
import { joinDigestItem } from "../digests/join.js";
import { decideAndPlan, overCap, type RouteDeps } from "../routing/plan.js";
import { overThrottle, throttleLimit } from "../routing/throttle.js";

/**
 * A round of release batches: each starts after the last timer the previous one read. One another
 * processor held (SKIP LOCKED) is passed over until the next round, which starts from the first.
 */
export interface ReleaseRound {
  after: DuePosition;
}

export interface ReleaseResult {
  /** Due notifications this run held the lock of and settled. */
  settled: number;
  /** Work items published for channels whose deferral ended. */
  published: number;
  /** Notifications deferred again (the user is in a quiet window again). */
  redeferred: number;
}

/**
 * Releases deferred notifications whose planned time has come. The policy runs again at
 * release, because the night may have changed things: an opt-out or a missing address now
 * suppresses, a new quiet window defers again, and the daily cap is counted on the day the
 * message actually goes out (one that was never sent is never counted). So is the
 * notification's throttle: a slot is taken at release, at the release's time, before the cap,
 * as routing takes it; over the limit, what would be sent is suppressed (throttled) or, with
 * `over_limit: "digest"`, joins its digest before the release commits. One that joined in a
 * release that did not commit is found in its digest when released again and stays there.
 *
 * Preferences and templates are read before the transaction, as they use other connections.
 * The transaction then takes the due rows FOR UPDATE SKIP LOCKED, so processors share the
 * work and each row is settled by one of them; it publishes the work items before it commits,
 * so a crash in between leaves the row due and it is released again (the work msg id
 * `<notification>:<channel>` and the send guard absorb the repeat). A released channel stays
 * `deferred`, with its planned time, until its worker moves it on: status only moves forward.
 */
export async function releaseDue(deps: RouteDeps, limit = 100, round?: ReleaseRound): Promise<ReleaseResult> {
  const now = deps.now();
  const due = await listDueDeferrals(deps.database, now, limit, round?.after ?? null);
  const last = due.at(-1);
  if (round && last) round.after = { dueAt: last.due_at, id: last.notification_id };
  if (due.length === 0) return { settled: 0, published: 0, redeferred: 0 };
  const plans = await Promise.all(due.map(async (row) => ({ row, ...(await decideAndPlan(deps, row, row.channels)) })));

  const released = await releaseDeferrals(
    deps.database,
    due.map((r) => r.notification_id),
    now,
    async (tx) => {
      const mine = plans.filter((p) => tx.locked.has(p.row.notification_id));
      const items: Array<{ item: WorkItem; priority: Priority }> = [];
      const updates: ReleasedChannel[] = [];
      const redeferred: Array<{ notificationId: string; until: Date }> = [];
      const digested: DueDeferral[] = [];
      for (const { row, input, planned: all } of mine) {
        let planned = all.filter((p) => tx.isDeferred(row.notification_id, p.channel));
        const limit = throttleLimit(row.throttle, input.now);
        const take = limit && {
          ...limit,
          clientId: row.client_id,
          userId: row.user_id,
          notificationId: row.notification_id,
        };
        let fresh = false;
        if (take && planned.some((p) => p.status === "pending")) {
          const folds = row.digest !== null && row.throttle?.over_limit === "digest";
          // Joined in a release that did not commit: it stays in its digest, taking no slot.
          const joined = folds && (await joinedDigest(deps.database, row.notification_id)) !== null;
          const slot = joined ? null : await tx.takeThrottleSlot(take);
          fresh = slot?.fresh ?? false;
          if (!slot?.granted) {
            planned = overThrottle(planned);
            if (folds) digested.push(row);
          }
        }
        const cap = input.preferences.rateCapPerDay;
        const sending = planned.some((p) => p.status === "pending");
        if (cap !== null && countsTowardCap(input, sending)) {
          if (!(await tx.takeCapSlot({ userId: row.user_id, day: capDay(input.now, input.preferences), cap }))) {
            if (take && fresh) await tx.returnThrottleSlot(take);
            planned = overCap(planned);
          }
        }
        for (const p of planned) {
          if (p.status === "pending") items.push({ item: p.item, priority: row.priority });
          else
            updates.push({
              notificationId: row.notification_id,
              channel: p.channel,
              status: p.status,
              reason: p.reason,
              nextAttemptAt: p.nextAttemptAt,
              ...(p.status === "suppressed" && p.detail ? { detail: p.detail } : {}),
            });
        }
        const until = planned.find((p) => p.status === "deferred")?.nextAttemptAt;
        if (until) redeferred.push({ notificationId: row.notification_id, until });
      }

      await tx.settleChannels(updates);
      await tx.redefer(redeferred);
      await tx.finish(
        mine.map((p) => p.row.notification_id).filter((id) => !redeferred.some((r) => r.notificationId === id)),
      );

      for (const row of digested) await joinDigestItem(deps, laneMessageOf(row));
      await Promise.all(
        items.map(({ item, priority }) =>
          deps.bus.publish(
            deps.bus.subjects.work(item.channel, priority),
            item,
            `${item.notification_id}:${item.channel}`,
          ),
        ),
      );
      deps.log.info(
        { settled: mine.length, published: items.length, redeferred: redeferred.length },
        "released deferred notifications",
      );
      return { settled: mine.length, published: items.length, redeferred: redeferred.length };
    },
  );
  return released ?? { settled: 0, published: 0, redeferred: 0 };
}

/** The lane message a due deferral was routed from, as its digest's join reads it. */
const laneMessageOf = (row: DueDeferral): LaneMessage => ({
  notification_id: row.notification_id,
  client_id: row.client_id,
  user_id: row.user_id,
  category: row.category,
  template_id: row.template_id,
  ...(row.template_version === null ? {} : { template_version: row.template_version }),
  priority: row.priority,
  channels: row.channels,
  data: row.data,
  created_at: row.created_at.toISOString(),
  ...(row.deliver_by === null ? {} : { deliver_by: row.deliver_by }),
  ...(row.digest === null ? {} : { digest: row.digest }),
  ...(row.throttle === null ? {} : { throttle: row.throttle }),
});
