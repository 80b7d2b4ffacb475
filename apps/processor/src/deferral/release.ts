import { capDay, countsTowardCap, type Priority, type WorkItem } from "@notify/core";
import { listDueDeferrals, type ReleasedChannel, releaseDeferrals } from "@notify/db";
import { decideAndPlan, overCap, type RouteDeps } from "../routing/plan.js";

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
 * message actually goes out (one that was never sent is never counted).
 *
 * Preferences and templates are read before the transaction, as they use other connections.
 * The transaction then takes the due rows FOR UPDATE SKIP LOCKED, so processors share the
 * work and each row is settled by one of them; it publishes the work items before it commits,
 * so a crash in between leaves the row due and it is released again (the work msg id
 * `<notification>:<channel>` and the send guard absorb the repeat). A released channel stays
 * `deferred`, with its planned time, until its worker moves it on: status only moves forward.
 */
export async function releaseDue(deps: RouteDeps, limit = 100): Promise<ReleaseResult> {
  const now = deps.now();
  const due = await listDueDeferrals(deps.database, now, limit);
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
      for (const { row, input, planned: all } of mine) {
        let planned = all.filter((p) => tx.isDeferred(row.notification_id, p.channel));
        const cap = input.preferences.rateCapPerDay;
        const sending = planned.some((p) => p.status === "pending");
        if (cap !== null && countsTowardCap(input, sending)) {
          if (!(await tx.takeCapSlot({ userId: row.user_id, day: capDay(input.now, input.preferences), cap })))
            planned = overCap(planned);
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
