import fc from "fast-check";
import t from "tap";
import { backoffMs } from "../src/backoff.js";

t.test("backoff waits half its exponential, capped ceiling and up to all of it, never below Retry-After", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 1, max: 10_000 }),
      fc.integer({ min: 0, max: 100_000 }),
      fc.double({ min: 0, max: 0.999999, noNaN: true }),
      (attempt, base, retryAfter, r) => {
        const max = base * 50;
        const delay = backoffMs(attempt, base, max, retryAfter, () => r);
        const ceiling = Math.min(max, base * 2 ** (attempt - 1));
        return delay >= Math.max(retryAfter, ceiling / 2) && delay <= Math.max(retryAfter, ceiling) && delay > 0;
      },
    ),
  );
  t.equal(
    backoffMs(3, 100, 10_000, 0, () => 0.5),
    300,
    "half of 100 * 2^2, plus half of the other half",
  );
  t.equal(
    backoffMs(30, 100, 10_000, 0, () => 0.999),
    9995,
    "capped",
  );
});

t.test("a retry is never immediate, whatever the draw (it was with full jitter: one draw in base)", async (t) => {
  t.ok(backoffMs(1, 100, 1000, 0, () => 0) >= 50);
  t.ok(backoffMs(1, 1, 1000, 0, () => 0) >= 1);
});
