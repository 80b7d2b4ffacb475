import type { Channel, Priority } from "./channels.js";
import { localDate, type QuietHours, quietWindowAt } from "./quiet-hours.js";

export interface PolicyPreferences {
  channelOptout: readonly string[];
  categoryOptout: readonly string[];
  quietHours: QuietHours | null;
  rateCapPerDay: number | null;
  /** The user's IANA time zone (preference `time_zone`), where `send_at_local` is read; null for none. */
  timeZone: string | null;
}

export interface Reachability {
  email: string | null;
  phone: string | null;
  pushSubscriptions: number;
}

/** Why a channel was not sent: the closed set shown as `reason` of a suppressed channel. */
export const SUPPRESSION_REASONS = [
  "opted_out",
  "category_opted_out",
  "quiet_hours",
  "rate_cap",
  "unreachable",
  // The address is on the suppression list for the notification's client (routing or its worker).
  "address_suppressed",
  // Over the notification's own throttle: `limit` of its key reached the user within `per`.
  "throttled",
] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

export type ChannelDecision =
  | { channel: Channel; action: "route" }
  | { channel: Channel; action: "suppress"; reason: SuppressionReason }
  | { channel: Channel; action: "defer"; until: Date };

/** What promotional traffic of a category does inside quiet hours. */
export type QuietHoursAction = "defer" | "drop";

export interface PolicyInput {
  /** The request's channels override, or null when the user's preferences decide. */
  requested: readonly Channel[] | null;
  category: string;
  priority: Priority;
  /** A critical category (security, OTP): no preference suppresses it. */
  critical: boolean;
  preferences: PolicyPreferences;
  reach: Reachability;
  now: Date;
  quietHoursAction: QuietHoursAction;
}

/** The channels that need an address or subscription, in the order they are tried. */
const ADDRESSED: readonly Channel[] = ["push", "email", "sms"];

/**
 * Channels a user can be reached on: push with a device subscription, email with an address,
 * SMS with a phone number. In-app is only used when a request asks for it: nothing says the
 * user has the app.
 */
export function reachableChannels(reach: Reachability): Channel[] {
  return ADDRESSED.filter((channel) => isReachable(channel, reach));
}

function isReachable(channel: Channel, reach: Reachability): boolean {
  if (channel === "email") return reach.email !== null && reach.email !== "";
  if (channel === "sms") return reach.phone !== null && reach.phone !== "";
  if (channel === "push") return reach.pushSubscriptions > 0;
  return true;
}

/**
 * The channels to decide on: the request's override, or else the channels the user can be
 * reached on (opted-out ones included, so their suppression shows). A user reachable nowhere
 * gets each addressed channel recorded as unreachable rather than nothing at all.
 */
export function candidateChannels(requested: readonly Channel[] | null, reach: Reachability): Channel[] {
  if (requested) return [...requested];
  const reachable = reachableChannels(reach);
  return reachable.length > 0 ? reachable : [...ADDRESSED];
}

/**
 * The preference policy for one notification, one decision per candidate channel:
 * - a channel without an address is unreachable, whatever the category;
 * - a critical category ignores every preference (opt-outs, quiet hours, the cap);
 * - an opted-out channel, then an opted-out category, is not routed;
 * - promotional traffic inside quiet hours is deferred to the window's end, or dropped when its
 *   category is configured so; transactional traffic ignores quiet hours.
 * The daily cap needs a counter (exact under concurrency), so the processor applies it after
 * this, to notifications `countsTowardCap` selects: over the cap, what would be sent is not.
 */
export function decideRouting(input: PolicyInput): ChannelDecision[] {
  const { preferences } = input;
  const decisions = candidateChannels(input.requested, input.reach).map((channel): ChannelDecision => {
    if (!isReachable(channel, input.reach)) return { channel, action: "suppress", reason: "unreachable" };
    if (input.critical) return { channel, action: "route" };
    if (preferences.channelOptout.includes(channel)) return { channel, action: "suppress", reason: "opted_out" };
    if (preferences.categoryOptout.includes(input.category))
      return { channel, action: "suppress", reason: "category_opted_out" };
    return { channel, action: "route" };
  });
  if (input.critical || input.priority !== "promotional" || !preferences.quietHours) return decisions;
  const window = quietWindowAt(input.now, preferences.quietHours);
  if (!window) return decisions;
  return decisions.map((d): ChannelDecision => {
    if (d.action !== "route") return d;
    return input.quietHoursAction === "drop"
      ? { channel: d.channel, action: "suppress", reason: "quiet_hours" }
      : { channel: d.channel, action: "defer", until: window.end };
  });
}

/**
 * Whether this notification takes one from the user's promotional daily cap: a non-critical
 * promotional notification that is about to be sent on at least one channel.
 */
export function countsTowardCap(input: Pick<PolicyInput, "priority" | "critical" | "preferences">, routing: boolean) {
  return routing && input.priority === "promotional" && !input.critical && input.preferences.rateCapPerDay !== null;
}

/**
 * The local day a promotional notification counts on. The user's time zone is the one stored
 * with their quiet hours; without quiet hours there is none, and the day is taken in UTC.
 */
export const capDay = (now: Date, preferences: Pick<PolicyPreferences, "quietHours">): string =>
  localDate(now, preferences.quietHours?.tz ?? "UTC");
