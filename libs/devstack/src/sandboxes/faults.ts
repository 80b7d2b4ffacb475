import * as v from "valibot";

/** How long a fault lasts, shared by every sandbox: a number of calls, a time, or both. */
export const FaultSpan = {
  /** Calls to affect; unlimited until cleared (or until `for_ms` ends). */
  times: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /** Milliseconds from now the fault lasts, however many calls meet it: a provider outage. */
  for_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
};

/**
 * The faults a sandbox answers with, oldest first: a call takes the first one that matches it
 * and has calls and time left.
 */
export function faultQueue<F extends { times?: number | undefined; for_ms?: number | undefined }>() {
  let faults: Array<{ fault: F; remaining: number; until: number }> = [];
  return {
    add(fault: F): void {
      faults.push({
        fault,
        remaining: fault.times ?? Number.POSITIVE_INFINITY,
        until: fault.for_ms === undefined ? Number.POSITIVE_INFINITY : Date.now() + fault.for_ms,
      });
    },
    take(matches: (fault: F) => boolean): F | undefined {
      const now = Date.now();
      faults = faults.filter((f) => f.until > now);
      const active = faults.find((f) => matches(f.fault));
      if (active === undefined) return undefined;
      active.remaining -= 1;
      if (active.remaining <= 0) faults = faults.filter((f) => f !== active);
      return active.fault;
    },
    clear(): void {
      faults = [];
    },
  };
}
