import { parseDuration, type ThrottleSpec } from "./digest.js";

/** A throttle as routing applies it: at most `limit` slots of its key per `perMs`. */
export interface ThrottleRule {
  key: string;
  limit: number;
  perMs: number;
}

/** A slot of a throttle's key: the notification that took it and when (ms since the epoch). */
export interface ThrottleSlot {
  notificationId: string;
  at: number;
}

/**
 * The rule of a notification's throttle, or null without one. Ingest accepts only a valid
 * `per` (ThrottleRequest); a lane message whose `per` does not parse routes unthrottled rather
 * than failing for ever.
 */
export function throttleRule(spec: ThrottleSpec | null | undefined): ThrottleRule | null {
  if (!spec) return null;
  const perMs = parseDuration(spec.per);
  return perMs === null ? null : { key: spec.key, limit: spec.limit, perMs };
}

/**
 * The sliding-window decision, for one (client, user, key): a notification routed at `now` is
 * let through when it holds a slot already (a redelivery takes no second one), or when fewer
 * than `limit` slots were taken within the period before it, after `now - perMs` (one taken
 * exactly `perMs` ago has left the window). Slots stamped after `now` (another processor's
 * clock ahead of this one) count. Postgres takes the same decision (takeThrottleSlot in
 * @notify/db), under a lock per key.
 */
export function throttleAllows(
  slots: readonly ThrottleSlot[],
  notificationId: string,
  now: number,
  rule: Pick<ThrottleRule, "limit" | "perMs">,
): boolean {
  if (slots.some((s) => s.notificationId === notificationId)) return true;
  const from = now - rule.perMs;
  let inWindow = 0;
  for (const slot of slots) if (slot.at > from) inWindow++;
  return inWindow < rule.limit;
}

/**
 * What became of a notification with a throttle once routing recorded it: `none` (it had no
 * throttle, or it was within its limit), `suppress` (over the limit: what would be sent is
 * suppressed with reason `throttled`), or `digest` (over the limit, with `over_limit: "digest"`:
 * it belongs in its digest instead, which routing hands it to).
 */
export function throttleOutcome(
  spec: ThrottleSpec | null | undefined,
  throttled: boolean,
): "none" | "suppress" | "digest" {
  if (!spec || !throttled) return "none";
  return spec.over_limit === "digest" ? "digest" : "suppress";
}
