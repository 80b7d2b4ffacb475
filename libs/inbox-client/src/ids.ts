/**
 * Orders inbox item ids (decimal strings of a growing 64-bit integer: newer is greater):
 * negative when `a` is older than `b`, 0 when they are the same item, positive when newer.
 */
export function compareIds(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}
