import * as v from "valibot";

/** A notification collected with others of its key and sent as one (the request's `digest`). */
export interface DigestSpec {
  key: string;
  /** A duration ("30m"): how long a digest collects, from its first item. */
  window: string;
  /** It is sent as soon as this many have joined. */
  max_items: number;
}

/** At most `limit` notifications of a key reach a user per period (the request's `throttle`). */
export interface ThrottleSpec {
  key: string;
  limit: number;
  /** A duration ("1h"): the sliding period. */
  per: string;
  /**
   * What happens to one over the limit: `suppress` (the default: its channels end suppressed,
   * reason throttled) or `digest` (it joins its digest instead, which the request must name).
   */
  over_limit?: "suppress" | "digest";
}

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^([1-9]\d{0,6})(s|m|h|d)$/;

/** Milliseconds of a duration such as "90s", "30m", "1h", "7d", or null. */
export function parseDuration(text: string): number | null {
  const match = DURATION.exec(text);
  if (!match) return null;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

export const DIGEST_WINDOW_MS = { min: 10_000, max: 7 * 86_400_000 } as const;
export const DIGEST_MAX_ITEMS = 1000;
export const DEFAULT_DIGEST_MAX_ITEMS = 50;
export const THROTTLE_PER_MS = { min: 1000, max: 30 * 86_400_000 } as const;
export const THROTTLE_MAX_LIMIT = 10_000;

const key = (what: string) =>
  v.pipe(
    v.string(`${what}.key must be a string`),
    v.regex(/^[\x21-\x7e]{1,128}$/, `${what}.key must be 1-128 printable ASCII characters without spaces`),
  );

const duration = (what: string, bounds: { min: number; max: number }, words: string) =>
  v.pipe(
    v.string(`${what} must be a string`),
    v.check((text) => {
      const ms = parseDuration(text);
      return ms !== null && ms >= bounds.min && ms <= bounds.max;
    }, `${what} must be a duration such as "30m" (a number and s, m, h or d), ${words}`),
  );

const count = (what: string, max: number) =>
  v.pipe(
    v.number(`${what} must be a number`),
    v.integer(`${what} must be an integer`),
    v.minValue(1, `${what} must be at least 1`),
    v.maxValue(max, `${what} must be at most ${max}`),
  );

/** The request's `digest`. */
export const DigestRequest = v.strictObject(
  {
    key: key("digest"),
    window: duration("digest.window", DIGEST_WINDOW_MS, "from 10s to 7d"),
    max_items: v.optional(count("digest.max_items", DIGEST_MAX_ITEMS), DEFAULT_DIGEST_MAX_ITEMS),
  },
  'digest must be an object {"key", "window", "max_items"?}',
);

/** The request's `throttle`. */
export const ThrottleRequest = v.strictObject(
  {
    key: key("throttle"),
    limit: count("throttle.limit", THROTTLE_MAX_LIMIT),
    per: duration("throttle.per", THROTTLE_PER_MS, "from 1s to 30d"),
    over_limit: v.optional(v.picklist(["suppress", "digest"], 'throttle.over_limit must be "suppress" or "digest"')),
  },
  'throttle must be an object {"key", "limit", "per", "over_limit"?}',
);
