import { type Channel, capDay, countsTowardCap, type LaneMessage, type PolicyInput, type WorkItem } from "@notify/core";
import type { UserProfile } from "../preferences/profiles.js";
import { buildItem, decideAndPlan, overCap, type Planned, type RouteDeps, takeCapSlot } from "./plan.js";

export type RouteOutcome = "routed" | "duplicate" | "gone";

/**
 * The processing stage for one lane message (spec rule 7): preferences and policy, rendering,
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
export async function routeNotification(deps: RouteDeps, message: LaneMessage): Promise<RouteOutcome> {
  const { input, profile, planned: decided } = await decideAndPlan(deps, message, message.channels);
  let recorded: { first: boolean; planned: Planned[] };
  try {
    recorded = await record(deps, message, input, decided);
  } catch (error) {
    // The row was removed by ingest's compensation (its publish failed): nothing to route.
    if ((error as { code?: string }).code === "23503") return "gone";
    throw error;
  }
  const { first, planned } = recorded;
  if (first)
    await publish(
      deps,
      message,
      planned.flatMap((p) => (p.status === "pending" ? [p.item] : [])),
    );
  else await publishPending(deps, message, planned, profile);
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
  return first ? "routed" : "duplicate";
}

/**
 * Writes the channel outcomes, and the deferral timer with them, unless an earlier run did
 * (even one that chose other channels: the user's reachable channels may have changed since).
 * Without a cap to take this is one statement. With one it is a transaction: the cap slot is
 * taken only by the run whose rows went in, and a crash undoes both.
 */
async function record(
  deps: RouteDeps,
  message: LaneMessage,
  input: PolicyInput,
  decided: Planned[],
): Promise<{ first: boolean; planned: Planned[] }> {
  const { sql } = deps.database;
  const id = message.notification_id;
  const channels = decided.map((p) => p.channel);
  const statuses = decided.map((p) => p.status);
  const reasons = decided.map((p) => p.reason) as string[];
  const planned = decided.map((p) => p.nextAttemptAt?.toISOString() ?? null) as string[];
  const deferredUntil = decided.find((p) => p.status === "deferred")?.nextAttemptAt.toISOString() ?? null;
  const cap = input.preferences.rateCapPerDay;

  const sending = decided.some((p) => p.status === "pending");

  if (cap === null || !countsTowardCap(input, sending)) {
    const [row] = await sql<{ inserted: number }[]>`
      with inserted as (
        insert into notification_channels (notification_id, channel, status, reason, next_attempt_at)
        select ${id}, * from unnest(${channels}::text[], ${statuses}::text[], ${reasons}::text[], ${planned}::timestamptz[])
        where not exists (select 1 from notification_channels where notification_id = ${id})
        on conflict (notification_id, channel) do nothing
        returning channel
      ), timer as (
        insert into deferred_notifications (notification_id, user_id, due_at)
        select ${id}, ${message.user_id}, ${deferredUntil}::timestamptz
        where ${deferredUntil}::timestamptz is not null and exists (select 1 from inserted)
        on conflict (notification_id) do nothing
      )
      select count(*)::int as inserted from inserted`;
    return { first: (row?.inserted ?? 0) > 0, planned: decided };
  }

  return sql.begin(async (tx) => {
    const inserted = await tx`
      insert into notification_channels (notification_id, channel, status, reason, next_attempt_at)
      select ${id}, * from unnest(${channels}::text[], ${statuses}::text[], ${reasons}::text[], ${planned}::timestamptz[])
      where not exists (select 1 from notification_channels where notification_id = ${id})
      on conflict (notification_id, channel) do nothing
      returning channel`;
    if (inserted.length === 0) return { first: false, planned: decided };
    if (await takeCapSlot(tx, message.user_id, capDay(input.now, input.preferences), cap)) {
      return { first: true, planned: decided };
    }
    await tx`
      update notification_channels set status = 'suppressed', reason = 'rate_cap', updated_at = now()
      where notification_id = ${id} and status = 'pending'`;
    return { first: true, planned: overCap(decided) };
  });
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
  const pending = await deps.database.sql<{ channel: Channel }[]>`
    select channel from notification_channels where notification_id = ${message.notification_id} and status = 'pending'`;
  const items: WorkItem[] = [];
  for (const { channel } of pending) {
    const mine = planned.find((p) => p.channel === channel);
    const outcome = mine?.status === "pending" ? mine : await buildItem(deps, message, profile, channel);
    if (outcome.status === "pending") items.push(outcome.item);
    else {
      await deps.database.sql`
        update notification_channels set status = ${outcome.status}, reason = ${outcome.reason}, updated_at = now()
        where notification_id = ${message.notification_id} and channel = ${channel} and status = 'pending'`;
    }
  }
  await publish(deps, message, items);
}
