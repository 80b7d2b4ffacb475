import { type Channel, capDay, countsTowardCap, type Priority, type WorkItem } from "@notify/core";
import { decideAndPlan, overCap, type Planned, type RouteDeps, takeCapSlot } from "../routing/plan.js";

interface DueRow {
  notification_id: string;
  user_id: string;
  category: string;
  template_id: string;
  template_version: number | null;
  priority: Priority;
  data: Record<string, unknown>;
  channels: Channel[];
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
  const { sql } = deps.database;
  const now = deps.now();
  const due = await sql<DueRow[]>`
    select d.notification_id, n.user_id, n.category, n.template_id, n.template_version, n.priority, n.data,
           array(select c.channel from notification_channels c
                 where c.notification_id = d.notification_id and c.status = 'deferred' order by c.channel) as channels
    from deferred_notifications d join notifications n on n.id = d.notification_id
    where d.due_at <= ${now} order by d.due_at, d.notification_id limit ${limit}`;
  if (due.length === 0) return { settled: 0, published: 0, redeferred: 0 };
  const plans = await Promise.all(due.map(async (row) => ({ row, ...(await decideAndPlan(deps, row, row.channels)) })));

  return sql.begin(async (tx) => {
    const locked = new Set(
      (
        await tx<{ notification_id: string }[]>`
          select notification_id from deferred_notifications
          where notification_id = any(${due.map((r) => r.notification_id)}) and due_at <= ${now}
          for update skip locked`
      ).map((r) => r.notification_id),
    );
    const mine = plans.filter((p) => locked.has(p.row.notification_id));
    if (mine.length === 0) return { settled: 0, published: 0, redeferred: 0 };
    const stillDeferred = new Set(
      (
        await tx<{ notification_id: string; channel: Channel }[]>`
          select notification_id, channel from notification_channels
          where notification_id = any(${mine.map((p) => p.row.notification_id)}) and status = 'deferred'
          for update`
      ).map((r) => `${r.notification_id} ${r.channel}`),
    );

    const items: Array<{ item: WorkItem; priority: Priority }> = [];
    const updates: Array<{ id: string; p: Exclude<Planned, { status: "pending" }> }> = [];
    const redeferred: Array<{ id: string; until: Date }> = [];
    for (const { row, input, planned: all } of mine) {
      let planned = all.filter((p) => stillDeferred.has(`${row.notification_id} ${p.channel}`));
      const cap = input.preferences.rateCapPerDay;
      const sending = planned.some((p) => p.status === "pending");
      if (cap !== null && countsTowardCap(input, sending)) {
        if (!(await takeCapSlot(tx, row.user_id, capDay(input.now, input.preferences), cap)))
          planned = overCap(planned);
      }
      for (const p of planned) {
        if (p.status === "pending") items.push({ item: p.item, priority: row.priority });
        else updates.push({ id: row.notification_id, p });
      }
      const until = planned.find((p) => p.status === "deferred")?.nextAttemptAt;
      if (until) redeferred.push({ id: row.notification_id, until });
    }

    if (updates.length > 0) {
      await tx`
        update notification_channels c
        set status = u.status, reason = u.reason, next_attempt_at = u.next_attempt_at, updated_at = now()
        from unnest(${updates.map((u) => u.id)}::text[], ${updates.map((u) => u.p.channel)}::text[],
                    ${updates.map((u) => u.p.status)}::text[], ${updates.map((u) => u.p.reason)}::text[],
                    ${updates.map((u) => u.p.nextAttemptAt?.toISOString() ?? null) as string[]}::timestamptz[])
             as u(notification_id, channel, status, reason, next_attempt_at)
        where c.notification_id = u.notification_id and c.channel = u.channel and c.status = 'deferred'`;
    }
    if (redeferred.length > 0) {
      await tx`
        update deferred_notifications d set due_at = u.due_at
        from unnest(${redeferred.map((r) => r.id)}::text[], ${redeferred.map((r) => r.until.toISOString())}::timestamptz[])
             as u(notification_id, due_at)
        where d.notification_id = u.notification_id`;
    }
    const done = mine.map((p) => p.row.notification_id).filter((id) => !redeferred.some((r) => r.id === id));
    if (done.length > 0) await tx`delete from deferred_notifications where notification_id = any(${done})`;

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
  });
}
