/**
 * Lane partition of a user: FNV-1a (32 bit) of the UTF-8 bytes of user_id, modulo the partition
 * count. Stable across processes and releases, so one user's notifications always share a
 * subject and stay ordered. The count is small and fixed (16-64): nats-server 2.9 consumers
 * slow down badly with thousands of subjects.
 */
export function partitionOf(userId: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError("partitions must be a positive integer");
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(userId)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}
