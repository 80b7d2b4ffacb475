/**
 * The smallest notification id (UUIDv7, lowercase text) of millisecond `ms`: ids sort by their
 * creation time, so a range of ids is a range of time.
 */
export function idFloor(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, "0").slice(-12);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}
