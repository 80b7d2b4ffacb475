import { type ThrottleSpec, throttleRule } from "@notify/core";
import type { ThrottleLimit } from "@notify/db";
import type { Planned } from "./plan.js";

/**
 * A notification's throttle as routing takes it, at the routing clock's `now` (the slot's time:
 * tests move it), or null without one. The throttle applies whatever the priority or category:
 * the caller asked for it.
 */
export function throttleLimit(spec: ThrottleSpec | null | undefined, now: Date): ThrottleLimit | null {
  const rule = throttleRule(spec);
  return rule === null ? null : { ...rule, at: now };
}

/** Over the throttle, nothing that would be sent is: it is suppressed with reason throttled. */
export const overThrottle = (planned: readonly Planned[]): Planned[] =>
  planned.map((p) =>
    p.status === "pending" ? { channel: p.channel, status: "suppressed", reason: "throttled", nextAttemptAt: null } : p,
  );
