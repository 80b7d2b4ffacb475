import type { Bus } from "@notify/bus";
import {
  ADDRESS_SUPPRESSED,
  type Channel,
  type ChannelDecision,
  decideRouting,
  type ExpiryReason,
  holdingEntry,
  isPastDeadline,
  type PolicyInput,
  type Priority,
  type SuppressionReason,
  suppressionDetail,
  type WorkItem,
} from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";
import type { ProfileSource, UserProfile } from "../preferences/profiles.js";
import type { Renderer, RenderFailure } from "./render.js";

export interface PolicyConfig {
  /** Categories no preference can suppress (CRITICAL_CATEGORIES). */
  criticalCategories: readonly string[];
  /** Promotional categories dropped, not deferred, inside quiet hours (QUIET_HOURS_DROP_CATEGORIES). */
  quietHoursDropCategories: readonly string[];
}

/** What routing one lane needs; each lane has its own Postgres pool (invariant 4). */
export interface RouteDeps {
  database: Database;
  bus: Bus;
  render: Renderer;
  profiles: ProfileSource;
  log: Logger;
  policy: PolicyConfig;
  /** The clock of every policy decision; tests move it. */
  now: () => Date;
}

/** The part of a notification that routing reads. */
export interface Routable {
  notification_id: string;
  /** Carried to the work item: an email's unsubscribe link names it. */
  client_id?: string;
  user_id: string;
  category: string;
  template_id: string;
  template_version?: number | null;
  priority: Priority;
  data: Record<string, unknown>;
  /** Never sent after this instant (ISO 8601); absent or null: no deadline. */
  deliver_by?: string | null | undefined;
  /** Not routed before this instant (ISO 8601); absent or null: at once. */
  send_at?: string | null | undefined;
  /** A digest's own notification: the digest it sends; absent or null: not one. */
  digest_of?: string | null | undefined;
}

/** Why a channel waits: the user's quiet hours, or the notification's send time. */
export type DeferralReason = "quiet_hours" | "scheduled";

/**
 * The recorded outcome for one channel, and the work item when it is to be sent. A channel whose
 * address is on the suppression list carries the entry, for its history row (`detail`).
 */
export type Planned =
  | { channel: Channel; status: "pending"; reason: null; nextAttemptAt: null; item: WorkItem }
  | { channel: Channel; status: "suppressed"; reason: SuppressionReason; nextAttemptAt: null; detail?: string }
  | { channel: Channel; status: "deferred"; reason: DeferralReason; nextAttemptAt: Date }
  | { channel: Channel; status: "failed"; reason: RenderFailure; nextAttemptAt: null }
  | { channel: Channel; status: "expired"; reason: ExpiryReason; nextAttemptAt: null };

export const policyInput = (
  deps: Pick<RouteDeps, "policy">,
  n: Routable,
  profile: UserProfile,
  requested: readonly Channel[] | null,
  now: Date,
): PolicyInput => ({
  requested,
  category: n.category,
  priority: n.priority,
  critical: deps.policy.criticalCategories.includes(n.category),
  preferences: profile.preferences,
  reach: { email: profile.email, phone: profile.phone, pushSubscriptions: profile.deviceTokens.length },
  now,
  quietHoursAction: deps.policy.quietHoursDropCategories.includes(n.category) ? "drop" : "defer",
});

/** The channel address a work item carries. */
function addressOf(channel: Channel, n: Routable, profile: UserProfile): string | null {
  if (channel === "email") return profile.email;
  if (channel === "sms") return profile.phone;
  if (channel === "push") return profile.deviceTokens.length > 0 ? JSON.stringify(profile.deviceTokens) : null;
  return n.user_id;
}

/**
 * The work item for a channel that is to be sent: rendered with the user's locale. A template
 * that cannot render for this data never will, so that channel fails at once with the reason.
 * An address on the suppression list for the notification's client (its own entries and those
 * for every client) is never sent to, whatever the category: the channel is suppressed, and its
 * history names the entry.
 */
export async function buildItem(
  deps: Pick<RouteDeps, "render" | "log">,
  n: Routable,
  profile: UserProfile,
  channel: Channel,
): Promise<Planned> {
  const to = addressOf(channel, n, profile);
  if (to === null) return { channel, status: "suppressed", reason: "unreachable", nextAttemptAt: null };
  const entry = holdingEntry(profile.suppressions, channel, n.client_id ?? "");
  if (entry !== null)
    return {
      channel,
      status: "suppressed",
      reason: ADDRESS_SUPPRESSED,
      nextAttemptAt: null,
      detail: suppressionDetail(entry),
    };
  const rendered = await deps.render({
    templateId: n.template_id,
    version: n.template_version,
    channel,
    locale: profile.locale,
    data: n.data,
    ...(n.digest_of ? { digest: true } : {}),
  });
  if (!rendered.ok) {
    deps.log.warn(
      { notification_id: n.notification_id, channel, reason: rendered.reason, detail: rendered.detail },
      "cannot render; channel failed",
    );
    return { channel, status: "failed", reason: rendered.reason, nextAttemptAt: null };
  }
  return {
    channel,
    status: "pending",
    reason: null,
    nextAttemptAt: null,
    item: {
      notification_id: n.notification_id,
      channel,
      priority: n.priority,
      ...(n.client_id === undefined ? {} : { client_id: n.client_id }),
      user_id: n.user_id,
      category: n.category,
      to,
      subject: rendered.subject,
      body: rendered.body,
      attempt: 0,
      ...(n.deliver_by ? { deliver_by: n.deliver_by } : {}),
    },
  };
}

/** Turns the policy's decisions into recorded outcomes, rendering what is to be sent. */
export function plan(
  deps: Pick<RouteDeps, "render" | "log">,
  n: Routable,
  profile: UserProfile,
  decisions: readonly ChannelDecision[],
): Promise<Planned[]> {
  return Promise.all(
    decisions.map(async (d): Promise<Planned> => {
      if (d.action === "suppress")
        return { channel: d.channel, status: "suppressed", reason: d.reason, nextAttemptAt: null };
      if (d.action === "defer")
        return { channel: d.channel, status: "deferred", reason: "quiet_hours", nextAttemptAt: d.until };
      return buildItem(deps, n, profile, d.channel);
    }),
  );
}

export async function decideAndPlan(
  deps: RouteDeps,
  n: Routable,
  requested: readonly Channel[] | null,
): Promise<{ input: PolicyInput; profile: UserProfile; planned: Planned[] }> {
  const profile = await deps.profiles.load(n.user_id);
  const input = policyInput(deps, n, profile, requested, deps.now());
  const decisions = decideRouting(input);
  const sendAt = scheduledFor(n, input.now);
  const planned = sendAt === null ? await plan(deps, n, profile, decisions) : scheduled(decisions, sendAt);
  return { input, profile, planned: withinDeadline(planned, n.deliver_by, input.now) };
}

/** The notification's send time when it is still to come, else null (routed now). */
export function scheduledFor(n: Pick<Routable, "send_at">, now: Date): Date | null {
  if (!n.send_at) return null;
  const at = Date.parse(n.send_at);
  return at > now.getTime() ? new Date(at) : null;
}

/**
 * A notification whose send time is to come: every channel the policy would send or defer waits
 * for that time (`scheduled`), rendering nothing yet. At that time the deferral's release runs
 * the policy again (preferences, quiet hours, the cap and the suppression list as they are
 * then) and renders. A channel the policy suppresses now stays suppressed.
 */
export const scheduled = (decisions: readonly ChannelDecision[], sendAt: Date): Planned[] =>
  decisions.map(
    (d): Planned =>
      d.action === "suppress"
        ? { channel: d.channel, status: "suppressed", reason: d.reason, nextAttemptAt: null }
        : { channel: d.channel, status: "deferred", reason: "scheduled", nextAttemptAt: sendAt },
  );

/**
 * Nothing is queued or held that could only go out after the notification's deadline: past
 * it, what would be sent or deferred expires; before it, a deferral whose planned time (the end
 * of quiet hours) comes after it expires now rather than at its release.
 */
export function withinDeadline(
  planned: readonly Planned[],
  deliverBy: string | null | undefined,
  now: Date,
): Planned[] {
  if (!deliverBy) return [...planned];
  const passed = isPastDeadline(deliverBy, now.getTime());
  const deadline = Date.parse(deliverBy);
  return planned.map((p): Planned => {
    if (passed && (p.status === "pending" || p.status === "deferred"))
      return { channel: p.channel, status: "expired", reason: "deadline_passed", nextAttemptAt: null };
    if (p.status === "deferred" && p.nextAttemptAt.getTime() > deadline)
      return {
        channel: p.channel,
        status: "expired",
        reason: p.reason === "scheduled" ? "deadline_before_send_at" : "deadline_before_quiet_hours_end",
        nextAttemptAt: null,
      };
    return p;
  });
}

/** Over the cap, nothing that would be sent is: it is suppressed with reason rate_cap. */
export const overCap = (planned: readonly Planned[]): Planned[] =>
  planned.map((p) =>
    p.status === "pending" ? { channel: p.channel, status: "suppressed", reason: "rate_cap", nextAttemptAt: null } : p,
  );
