import * as v from "valibot";
import type { ChannelStatus } from "./channel-status.js";
import { CHANNELS, type Channel } from "./channels.js";
import type { FieldError } from "./errors.js";

/**
 * Channel fallback: a notification names its channel and, in order, where to go next when that
 * channel does not reach the user, each step with the conditions that take it:
 * - failed: the earlier channel failed for good (failed, bounced or expired);
 * - suppressed: preferences suppressed it, the user has no address for it, or the address is on
 *   the suppression list;
 * - unconfirmed: it was sent, but no receipt confirmed the delivery within
 *   `confirm_within_seconds` (push, in-app and SMTP relays send no receipts: there it always
 *   fires once the window is over).
 */
export const FALLBACK_CONDITIONS = ["failed", "suppressed", "unconfirmed"] as const;
export type FallbackCondition = (typeof FALLBACK_CONDITIONS)[number];

/** The longest a step waits for a receipt: a day. */
export const MAX_CONFIRM_SECONDS = 86_400;
/**
 * How long a `failed` step keeps watching a channel its provider accepted, for a bounce that
 * receipts report later; a delivery receipt ends the wait sooner.
 */
export const BOUNCE_WAIT_SECONDS = 3600;
/** Providers that report what became of a send (delivery receipts, bounces). */
export const PROVIDERS_WITH_RECEIPTS: readonly string[] = ["sendgrid", "plivo"];
/** Steps a chain may have after its first channel. */
export const MAX_FALLBACK_STEPS = 3;

export const FallbackStep = v.strictObject({
  channel: v.picklist(CHANNELS, `fallback channels must be one of ${CHANNELS.join(", ")}`),
  when: v.pipe(
    v.array(
      v.picklist(FALLBACK_CONDITIONS, `when may only contain ${FALLBACK_CONDITIONS.join(", ")}`),
      "when must be an array",
    ),
    v.minLength(1, "when must name at least one condition"),
    v.checkItems((item, index, array) => array.indexOf(item) === index, "when must not repeat"),
  ),
  confirm_within_seconds: v.optional(
    v.pipe(
      v.number("confirm_within_seconds must be a number"),
      v.integer("confirm_within_seconds must be an integer"),
      v.minValue(1, "confirm_within_seconds must be at least 1"),
      v.maxValue(MAX_CONFIRM_SECONDS, `confirm_within_seconds must be at most ${MAX_CONFIRM_SECONDS}`),
    ),
  ),
});
export type FallbackStep = v.InferOutput<typeof FallbackStep>;

export const FallbackChain = v.pipe(
  v.array(FallbackStep, "fallback must be an array"),
  v.minLength(1, "fallback must not be empty when present"),
  v.maxLength(MAX_FALLBACK_STEPS, `fallback may have at most ${MAX_FALLBACK_STEPS} steps`),
);

/**
 * What a request's fallback chain needs beyond its own shape: one first channel to start from
 * (`channels` with exactly one entry), no channel twice along the chain, and a confirmation
 * window exactly on the steps that wait for one.
 */
export function fallbackProblems(
  channels: readonly Channel[] | undefined,
  steps: readonly FallbackStep[],
): FieldError[] {
  const problems: FieldError[] = [];
  if (channels?.length !== 1)
    problems.push({ field: "channels", message: "must name exactly one channel, the first of the fallback chain" });
  const seen = new Set<Channel>(channels?.length === 1 ? channels : []);
  steps.forEach((step, i) => {
    if (seen.has(step.channel))
      problems.push({ field: `fallback.${i}.channel`, message: "must not repeat a channel earlier in the chain" });
    seen.add(step.channel);
    const waits = step.when.includes("unconfirmed");
    if (waits && step.confirm_within_seconds === undefined)
      problems.push({ field: `fallback.${i}.confirm_within_seconds`, message: "is required with unconfirmed" });
    if (!waits && step.confirm_within_seconds !== undefined)
      problems.push({ field: `fallback.${i}.confirm_within_seconds`, message: "is only allowed with unconfirmed" });
  });
  return problems;
}

/** The channel a step watches, as far as the fallback decision needs it. */
export interface WatchedChannel {
  status: ChannelStatus;
  /** Why it has its status (a suppression's reason). */
  reason?: string | null;
  /** The provider that took its send, when one did. */
  provider?: string | null;
  /** A receipt confirmed the delivery. */
  confirmed: boolean;
}

/**
 * What a step does about the channel it watches:
 * - `wait`: the channel has no outcome yet; or it was sent and the step waits for a receipt
 *   (`confirmWithinSeconds`: from the first look at it; `confirmDue` says that window is over):
 *   an `unconfirmed` step fires when it ends, a `failed` step watching for a bounce stops then;
 * - `take`: one of its conditions holds, the next channel is to be sent;
 * - `stop`: the channel reached the user, or failed in a way the step does not cover: the chain ends.
 *
 * A channel suppressed by the user's daily cap or by the notification's throttle never takes a
 * step: each counts a notification, and another channel would send it anyway. Nor does a canceled one: its client
 * wants nothing more of the notification sent (the cancel also ends the chain itself).
 */
export type FallbackDecision =
  | { action: "wait"; confirmWithinSeconds?: number }
  | { action: "take"; because: FallbackCondition }
  | { action: "stop" };

export function decideFallback(step: FallbackStep, watched: WatchedChannel, confirmDue: boolean): FallbackDecision {
  const { status } = watched;
  if (status === "canceled") return { action: "stop" };
  if (status === "failed" || status === "bounced" || status === "expired")
    return step.when.includes("failed") ? { action: "take", because: "failed" } : { action: "stop" };
  if (status === "suppressed")
    return step.when.includes("suppressed") && watched.reason !== "rate_cap" && watched.reason !== "throttled"
      ? { action: "take", because: "suppressed" }
      : { action: "stop" };
  if (status === "delivered" || status === "unsettled") {
    if (watched.confirmed) return { action: "stop" };
    if (step.when.includes("unconfirmed")) {
      if (confirmDue) return { action: "take", because: "unconfirmed" };
      return { action: "wait", confirmWithinSeconds: step.confirm_within_seconds ?? 0 };
    }
    // Accepted is not delivered: a provider with receipts may still report a bounce.
    const bounceMayCome = step.when.includes("failed") && PROVIDERS_WITH_RECEIPTS.includes(watched.provider ?? "");
    if (!bounceMayCome || confirmDue) return { action: "stop" };
    return { action: "wait", confirmWithinSeconds: BOUNCE_WAIT_SECONDS };
  }
  return { action: "wait" };
}
