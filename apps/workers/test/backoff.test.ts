import fc from "fast-check";
import t from "tap";
import { retryDelayMs } from "../src/delivery/backoff.js";

t.test("backoff is full jitter under an exponential, capped ceiling, never below Retry-After", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 1, max: 10_000 }),
      fc.integer({ min: 0, max: 100_000 }),
      fc.double({ min: 0, max: 0.999999, noNaN: true }),
      (attempt, base, retryAfter, r) => {
        const max = base * 50;
        const delay = retryDelayMs(attempt, base, max, retryAfter, () => r);
        const ceiling = Math.min(max, base * 2 ** (attempt - 1));
        return delay >= retryAfter && delay <= Math.max(retryAfter, ceiling);
      },
    ),
  );
  t.equal(
    retryDelayMs(3, 100, 10_000, 0, () => 0.5),
    200,
    "half of 100 * 2^2",
  );
  t.equal(
    retryDelayMs(30, 100, 10_000, 0, () => 0.999),
    9990,
    "capped",
  );
});
