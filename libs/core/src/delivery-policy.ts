/**
 * Delay before retry number `attempt` (1-based): an exponential ceiling, capped, with equal
 * jitter (AWS architecture blog: half the ceiling fixed, half random), never below what the
 * other side asked for with Retry-After. Half of the ceiling is always waited, so a retry is
 * never immediate: with full jitter one in every `ceiling` draws was a retry at once.
 */
export function backoffMs(
  attempt: number,
  baseMs: number,
  maxMs: number,
  retryAfterMs = 0,
  random = Math.random,
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  const half = ceiling / 2;
  return Math.max(retryAfterMs, Math.ceil(half + random() * half));
}
