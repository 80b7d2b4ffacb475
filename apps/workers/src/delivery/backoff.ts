/**
 * Delay before retry number `attempt` (1-based): exponential with full jitter (AWS
 * architecture blog), at least what the provider asked for with Retry-After.
 */
export function retryDelayMs(
  attempt: number,
  baseMs: number,
  maxMs: number,
  retryAfterMs = 0,
  random = Math.random,
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.max(retryAfterMs, Math.floor(random() * ceiling));
}
