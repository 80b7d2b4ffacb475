import fc from "fast-check";
import t from "tap";
import { storedAt } from "../src/dead-letters.js";

// A stored message's time, to the millisecond JetStream compares a start time with: its
// nanoseconds floored, exactly. As a double they are rounded to 256 ns, which would put a
// message stored in the last 192 ns of a millisecond into the next one, and a window starting at
// that millisecond would count it where JetStream does not.
const NOW_NS = 1_764_524_649_400_000_000n;

t.test("the last nanoseconds of a millisecond stay in it", async (t) => {
  t.equal(storedAt({ timestampNanos: NOW_NS + 999_900n }).getTime(), Number(NOW_NS / 1_000_000n));
});

t.test("every time is its nanoseconds floored to the millisecond", async (t) => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: 4_102_444_800_000_000_000n }), (ns) => {
      const ms = storedAt({ timestampNanos: ns }).getTime();
      return BigInt(ms) * 1_000_000n <= ns && ns < (BigInt(ms) + 1n) * 1_000_000n;
    }),
    { numRuns: 2000 },
  );
  t.pass("floored");
});
