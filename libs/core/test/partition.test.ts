import fc from "fast-check";
import t from "tap";
import { partitionOf } from "../src/index.js";

t.test("partitionOf is stable and in range for any user id", async (t) => {
  fc.assert(
    fc.property(
      fc.string({ unit: "grapheme", maxLength: 64 }),
      fc.integer({ min: 1, max: 64 }),
      (userId, partitions) => {
        const p = partitionOf(userId, partitions);
        return Number.isInteger(p) && p >= 0 && p < partitions && p === partitionOf(userId, partitions);
      },
    ),
  );
  t.pass("property held");
});

t.test("partitionOf hashes the UTF-8 bytes of any id, ASCII or not", async (t) => {
  const reference = (userId: string, partitions: number) => {
    let hash = 0x811c9dc5;
    for (const byte of new TextEncoder().encode(userId)) {
      hash ^= byte;
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash % partitions;
  };
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ unit: "grapheme", maxLength: 64 }),
        fc.string({ maxLength: 64 }),
        fc.string({ unit: "binary" }),
      ),
      fc.integer({ min: 1, max: 2 ** 31 }),
      (userId, partitions) => partitionOf(userId, partitions) === reference(userId, partitions),
    ),
  );
  t.equal(partitionOf("é", 2 ** 31), reference("é", 2 ** 31), "a two-byte character");
  t.pass("property held");
});

t.test("partitionOf matches FNV-1a reference values", async (t) => {
  // FNV-1a 32-bit of "" is 0x811c9dc5 and of "a" is 0xe40c292c (published test vectors).
  t.equal(partitionOf("", 2 ** 31), 0x811c9dc5 % 2 ** 31);
  t.equal(partitionOf("a", 2 ** 31), 0xe40c292c % 2 ** 31);
});

t.test("partitionOf spreads users over every partition", async (t) => {
  const seen = new Set<number>();
  for (let i = 0; i < 2000; i++) seen.add(partitionOf(`user-${i}`, 16));
  t.equal(seen.size, 16);
});

t.test("partitionOf refuses a bad partition count", async (t) => {
  t.throws(() => partitionOf("u", 0), RangeError);
  t.throws(() => partitionOf("u", 1.5), RangeError);
});
