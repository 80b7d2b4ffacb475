import type { Channel } from "./channels.js";

export interface PolicyPreferences {
  channelOptout: readonly string[];
  categoryOptout: readonly string[];
}

export interface Reachability {
  email: string | null;
  phone: string | null;
  pushSubscriptions: number;
}

export type RoutingDecision =
  | { channel: Channel; route: true }
  | { channel: Channel; route: false; reason: "opted_out" | "category_opted_out" | "unreachable" };

/**
 * Channels a user can be reached on when the request names none: email with an address, SMS
 * with a phone number, push with a device subscription. In-app is only used when asked for.
 */
export function reachableChannels(reach: Reachability): Channel[] {
  const channels: Channel[] = [];
  if (reach.pushSubscriptions > 0) channels.push("push");
  if (reach.email) channels.push("email");
  if (reach.phone) channels.push("sms");
  return channels;
}

/**
 * The opt-out rows of the spec's preference policy. A critical category (security, OTP) is
 * never suppressed by a preference; an unreachable channel is recorded, not silently skipped.
 */
export function decideChannels(input: {
  requested: readonly Channel[] | null;
  category: string;
  critical: boolean;
  preferences: PolicyPreferences;
  reach: Reachability;
}): RoutingDecision[] {
  const candidates =
    input.requested ?? reachableChannels(input.reach).filter((c) => !input.preferences.channelOptout.includes(c));
  return candidates.map((channel): RoutingDecision => {
    const address = channel === "email" ? input.reach.email : channel === "sms" ? input.reach.phone : "ok";
    const pushable = channel !== "push" || input.reach.pushSubscriptions > 0;
    if (!address || !pushable) return { channel, route: false, reason: "unreachable" };
    if (!input.critical && input.preferences.channelOptout.includes(channel))
      return { channel, route: false, reason: "opted_out" };
    if (!input.critical && input.preferences.categoryOptout.includes(input.category)) {
      return { channel, route: false, reason: "category_opted_out" };
    }
    return { channel, route: true };
  });
}
