import { type Bus, claimGuard, type KV, readGuard } from "@notify/bus";
import { type ChannelStatus, type GuardValue, guardKey, type WorkItem } from "@notify/core";
import { type Database, resetChannelForReplay } from "@notify/db";
import { REPLAY_REASON } from "./plan.js";

const REPLAYABLE: ChannelStatus[] = ["failed", "unsettled", "pending"];

/**
 * Hands the item back to the workers: releases the send guard so the next attempt may claim it
 * (never a live claim, and one whose outcome is unknown only with `includeUnsettled`),
 * resets the channel to pending with a fresh retry budget (the one sanctioned backward move,
 * logged as such), and publishes the work item again; the workers' guard and token buckets
 * then apply as to any item. Answers why it did not, or null.
 */
export async function replay(
  deps: { database: Database; bus: Bus; guard: KV },
  item: WorkItem,
  includeUnsettled: boolean,
): Promise<string | null> {
  const key = guardKey(item.notification_id, item.channel);
  const seen = await readGuard(deps.guard, key);
  if (seen) {
    if (seen.value.state === "sent") return "the provider accepted it (send guard: sent)";
    // Its client canceled it: never sent, whoever asks.
    if (seen.value.state === "canceled") return "its client canceled it (send guard: canceled)";
    // A worker holds the claim and may be calling the provider now (a replay repeated after
    // its own work item was taken, say): released, the next attempt would send a second time.
    if (seen.value.state === "sending")
      return "a send is in flight (send guard: sending); replay it once it has settled";
    if (seen.value.state === "unknown" && !includeUnsettled)
      return "the provider may have accepted it (send guard: unknown); include unsettled to resend anyway";
    if (seen.value.state !== "failed") {
      const released: GuardValue = { ...seen.value, state: "failed", at: Date.now(), reason: "released for a replay" };
      // A compare-and-set on the revision read: a worker that took the guard since wins.
      const written = await claimGuard(deps.guard, key, seen, released).catch(() => null);
      if (!written) return "the send guard changed meanwhile; run the replay again";
    }
  }
  const statuses = includeUnsettled ? REPLAYABLE : REPLAYABLE.filter((s) => s !== "unsettled");
  const moved = await resetChannelForReplay(deps.database, {
    notificationId: item.notification_id,
    channel: item.channel,
    from: statuses,
    reason: REPLAY_REASON,
  });
  if (!moved) return "the channel changed meanwhile";
  await deps.bus.publish(
    deps.bus.subjects.work(item.channel, item.priority),
    item,
    `${item.notification_id}:${item.channel}:replay:${item.attempt}`,
  );
  return null;
}
