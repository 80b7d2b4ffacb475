import { UsageError } from "./command.js";

/** The admin API's bound too: a grace period is for switching callers over, not for keeping two keys. */
export const MAX_GRACE_SECONDS = 7 * 24 * 3600;

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/** `--grace`: "45s", "90m", "24h", "1d" or bare seconds ("3600"), at most 7 days; in seconds. */
export function parseGraceDuration(text: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(text);
  if (!match) throw new UsageError(`--grace must be a duration such as 90m, 24h, 1d or 3600 (seconds), got "${text}"`);
  const unit = (match[2] || "s") as keyof typeof UNIT_SECONDS;
  const seconds = Number(match[1]) * UNIT_SECONDS[unit];
  if (seconds > MAX_GRACE_SECONDS) throw new UsageError(`--grace must be at most 7d (${MAX_GRACE_SECONDS} seconds)`);
  return seconds;
}
