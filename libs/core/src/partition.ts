/**
 * Lane partition of a user: FNV-1a (32 bit) of the UTF-8 bytes of user_id, modulo the partition
 * count. Stable across processes and releases, so one user's notifications always share a
 * subject and stay ordered. The count is small and fixed (16-64): nats-server 2.9 consumers
 * slow down badly with thousands of subjects.
 */
export function partitionOf(userId: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError("partitions must be a positive integer");
  let hash = 0x811c9dc5;
  // An ASCII id is its own UTF-8 bytes: hashed from the string, without encoding it (every
  // request and every routed notification asks). Anything else goes through the encoder.
  for (let i = 0; i < userId.length; i++) {
    const unit = userId.charCodeAt(i);
    if (unit >= 0x80) return fnv1a(utf8.encode(userId)) % partitions;
    hash ^= unit;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

const utf8 = new TextEncoder();

function fnv1a(bytes: Uint8Array): number {
  let hash = 0x811c9dc5;
  for (const byte of bytes) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}
