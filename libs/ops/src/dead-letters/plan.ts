import { type KV, readGuard } from "@notify/bus";
import {
  ADDRESS_SUPPRESSED,
  type Channel,
  type DeadLetter,
  decideRouting,
  guardKey,
  holdingEntry,
  isPastDeadline,
  isTimeZone,
  parseClock,
  suppressionAddress,
  suppressionDetail,
  type WorkItem,
} from "@notify/core";
import { type ChannelState, type Database, type ReachProfile, readReachProfile, suppressionsOf } from "@notify/db";

/** The status reason of a channel a replay has reset: a replay interrupted before its publish is resumed. */
export const REPLAY_REASON = "replay";

const time = (date: Date | string) => new Date(date).toISOString().replace(/\.\d+Z$/, "Z");

/** Where the channel reaches the user today: a fixed address may be exactly what the replay is for. */
function addressOf(channel: Channel, userId: string, profile: ReachProfile | undefined): string | null {
  if (channel === "email") return profile?.email ?? null;
  if (channel === "sms") return profile?.phone ?? null;
  if (channel === "push") {
    const tokens = profile?.device_tokens ?? [];
    return tokens.length > 0 ? JSON.stringify(tokens) : null;
  }
  return userId;
}

export type ReplayPlan =
  | { action: "replay"; item: WorkItem; address_changed: boolean }
  | { action: "skip"; why: string };

/**
 * The suppression list's entry that keeps a channel from being sent to `to`, as the workers'
 * check before a send reads it: one of the notification's client's own entries or one for every
 * client, for the address as the list keeps it. Null when none holds, or for a channel whose
 * addresses the list does not keep (push, in-app).
 */
async function holdingSuppression(database: Database, letter: DeadLetter, to: string): Promise<string | null> {
  if (letter.channel !== "email" && letter.channel !== "sms") return null;
  const address = suppressionAddress(letter.channel, to);
  if (address === null) return null;
  // The letter names its client (its work item, or the notification it carries); one that names
  // neither is matched against the entries for every client, and the workers' own check, which
  // reads the client from the notification, still refuses the rest.
  const clientId = letter.item.client_id ?? letter.notification?.client_id ?? "";
  const entries = await suppressionsOf(database, clientId, [{ channel: letter.channel, address }]);
  const entry = holdingEntry(
    entries.map((e) => ({ ...e, created_at: e.created_at.toISOString() })),
    letter.channel,
    clientId,
  );
  return entry === null ? null : suppressionDetail(entry);
}

/**
 * Whether a dead letter may be sent again, and as what: never when the channel has been
 * delivered (or the provider accepted it), only with `includeUnsettled` when the provider may
 * have accepted it, never past its deliver-by deadline, only if the user's preferences today
 * still allow it, to the user's current address, and never to an address on the suppression
 * list (the plan names the entry, so a dry run says what the workers would refuse).
 */
export async function planReplay(
  deps: { database: Database; guard: KV; criticalCategories: readonly string[]; now: Date },
  letter: DeadLetter,
  state: ChannelState | undefined,
  includeUnsettled: boolean,
): Promise<ReplayPlan> {
  if (!state) return { action: "skip", why: "the notification no longer exists" };
  const resumable = state.status === "pending" && state.reason === REPLAY_REASON;
  if (state.status === "unsettled" && !includeUnsettled) {
    return { action: "skip", why: "unsettled: the provider may have accepted it (--include-unsettled resends anyway)" };
  }
  if (state.status !== "failed" && state.status !== "unsettled" && !resumable) {
    return { action: "skip", why: `channel is ${state.status}` };
  }
  const deadline = letter.item.deliver_by;
  if (isPastDeadline(deadline, deps.now.getTime()))
    return { action: "skip", why: `its deliver-by deadline (${time(deadline as string)}) has passed` };
  const guard = await readGuard(deps.guard, guardKey(letter.item.notification_id, letter.channel));
  if (guard?.value.state === "sent") return { action: "skip", why: "the provider accepted it (send guard: sent)" };
  if (guard?.value.state === "canceled")
    return { action: "skip", why: "its client canceled it (send guard: canceled)" };

  const profile = await readReachProfile(deps.database, letter.item.user_id);
  const to = addressOf(letter.channel, letter.item.user_id, profile);
  if (to === null) return { action: "skip", why: `unreachable: the user has no ${letter.channel} address now` };
  const quiet = profile?.quiet_hours ?? null;
  const usableQuiet =
    quiet && parseClock(quiet.start) !== null && parseClock(quiet.end) !== null && isTimeZone(quiet.tz);
  const [decision] = decideRouting({
    requested: [letter.channel],
    category: letter.item.category,
    priority: letter.item.priority,
    critical: deps.criticalCategories.includes(letter.item.category),
    preferences: {
      channelOptout: profile?.channel_optout ?? [],
      categoryOptout: profile?.category_optout ?? [],
      quietHours: usableQuiet ? quiet : null,
      rateCapPerDay: null,
      // Only send_at_local reads it, and a replay sends now.
      timeZone: null,
    },
    reach: {
      email: profile?.email ?? null,
      phone: profile?.phone ?? null,
      pushSubscriptions: profile?.device_tokens?.length ?? 0,
    },
    now: deps.now,
    quietHoursAction: "defer",
  });
  if (decision?.action === "suppress") return { action: "skip", why: `preferences today: ${decision.reason}` };
  if (decision?.action === "defer") return { action: "skip", why: `inside quiet hours until ${time(decision.until)}` };
  const suppressed = await holdingSuppression(deps.database, letter, to);
  if (suppressed !== null) {
    return { action: "skip", why: `the address is on the suppression list (${ADDRESS_SUPPRESSED}: ${suppressed})` };
  }
  return {
    action: "replay",
    item: { ...letter.item, to, attempt: state.attempts },
    address_changed: to !== letter.item.to,
  };
}
