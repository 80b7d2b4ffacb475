import fc from "fast-check";
import t from "tap";
import {
  availableTokens,
  type LaneBuckets,
  type RateLimit,
  splitRate,
  takeForLanes,
  takeTokens,
} from "../src/index.js";

const limits = fc.record({
  perSecond: fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.double({ min: 0.2, max: 50, noNaN: true })),
  burst: fc.integer({ min: 1, max: 100 }),
});
/** Request instants (ms, non-decreasing, often several at the same instant) and sizes. */
const requests = fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 1, max: 20 })), {
  maxLength: 200,
});

/** Grants as (instant, count), from a sequence of requests against one bucket. */
function run(limit: RateLimit, steps: Array<[number, number]>): Array<[number, number]> {
  let tat = 0;
  let now = 1_000_000;
  const grants: Array<[number, number]> = [];
  for (const [gap, wanted] of steps) {
    now += gap % 3 === 0 ? 0 : gap;
    const take = takeTokens(tat, now, wanted, limit);
    if (take.granted === 0 && take.tat !== tat) throw new Error("a refusal changed the state");
    tat = take.tat;
    if (take.granted > 0) grants.push([now, take.granted]);
  }
  return grants;
}

/** The most sends granted inside any window of `windowMs` (inclusive of both ends). */
function maxInWindow(grants: Array<[number, number]>, windowMs: number): number {
  let best = 0;
  for (let i = 0; i < grants.length; i++) {
    let sum = 0;
    for (
      let j = i;
      j < grants.length && (grants[j] as [number, number])[0] - (grants[i] as [number, number])[0] <= windowMs;
      j++
    ) {
      sum += (grants[j] as [number, number])[1];
    }
    best = Math.max(best, sum);
  }
  return best;
}

t.test("property: no window ever holds more than burst + rate x window sends", async (t) => {
  fc.assert(
    fc.property(limits, requests, fc.integer({ min: 0, max: 5000 }), (limit, steps, windowMs) => {
      const grants = run(limit, steps);
      return maxInWindow(grants, windowMs) <= limit.burst + (limit.perSecond * windowMs) / 1000 + 1e-6;
    }),
  );
  t.pass("held");
});

t.test("property: a refused request is told when the next token comes, and gets it then", async (t) => {
  fc.assert(
    fc.property(limits, requests, (limit, steps) => {
      let tat = 0;
      let now = 5_000;
      for (const [gap, wanted] of steps) {
        now += gap;
        const take = takeTokens(tat, now, wanted, limit);
        tat = take.tat;
        if (take.granted < wanted) {
          if (!(take.retryInMs > 0)) return false;
          if (takeTokens(tat, now + take.retryInMs, 1, limit).granted !== 1) return false;
        }
      }
      return true;
    }),
  );
  t.pass("held");
});

t.test("a full bucket grants its burst at once, then one per interval", async (t) => {
  const limit = { perSecond: 10, burst: 3 };
  const first = takeTokens(0, 1000, 5, limit);
  t.same([first.granted, first.retryInMs], [3, 100]);
  t.equal(takeTokens(first.tat, 1050, 1, limit).granted, 0, "not before the interval");
  const later = takeTokens(first.tat, 1100, 5, limit);
  t.same([later.granted, later.retryInMs], [1, 100]);
  t.equal(takeTokens(later.tat, 10_000, 10, limit).granted, 3, "an idle spell refills only up to the burst");
});

t.test("splitRate reserves a share of the rate and of the burst", async (t) => {
  t.same(splitRate({ perSecond: 100, burst: 50 }, 20), {
    reserved: { perSecond: 20, burst: 10 },
    shared: { perSecond: 80, burst: 40 },
  });
  t.same(splitRate({ perSecond: 100, burst: 50 }, 0), { reserved: null, shared: { perSecond: 100, burst: 50 } });
  t.same(splitRate({ perSecond: 5, burst: 1 }, 20).shared.burst, 1, "each bucket keeps at least one token");
});

const laneSteps = fc.array(
  fc.record({
    gap: fc.integer({ min: 0, max: 300 }),
    transactional: fc.integer({ min: 0, max: 10 }),
    promotional: fc.integer({ min: 0, max: 30 }),
  }),
  { minLength: 1, maxLength: 200 },
);

t.test("property: lanes share the limit; promotional never eats the reserve", async (t) => {
  fc.assert(
    fc.property(
      fc.record({ perSecond: fc.integer({ min: 1, max: 500 }), burst: fc.integer({ min: 2, max: 50 }) }),
      fc.integer({ min: 0, max: 90 }),
      laneSteps,
      fc.integer({ min: 0, max: 3000 }),
      (limit, percent, steps, windowMs) => {
        const rates = splitRate(limit, percent);
        let state: LaneBuckets = { reserved: 0, shared: 0 };
        let now = 1_000_000;
        const total: Array<[number, number]> = [];
        const promotional: Array<[number, number]> = [];
        for (const step of steps) {
          now += step.gap;
          const take = takeForLanes(state, now, step, rates);
          if (take.granted.transactional > step.transactional || take.granted.promotional > step.promotional) {
            return false;
          }
          state = take.state;
          total.push([now, take.granted.transactional + take.granted.promotional]);
          promotional.push([now, take.granted.promotional]);
        }
        const bursts = (rates.reserved?.burst ?? 0) + rates.shared.burst;
        return (
          maxInWindow(total, windowMs) <= bursts + (limit.perSecond * windowMs) / 1000 + 1e-6 &&
          maxInWindow(promotional, windowMs) <= rates.shared.burst + (rates.shared.perSecond * windowMs) / 1000 + 1e-6
        );
      },
    ),
  );
  t.pass("held");
});

t.test("property: transactional keeps its reserved rate under any promotional flood", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 10, max: 500 }),
      fc.integer({ min: 10, max: 90 }),
      fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 20, maxLength: 200 }),
      (perSecond, percent, gaps) => {
        const rates = splitRate({ perSecond, burst: 10 }, percent);
        const reserved = rates.reserved as RateLimit;
        // Asked at least once per refill of the reserve: tokens past a full bucket are never owed.
        const refillMs = Math.max(1, Math.floor((reserved.burst * 1000) / reserved.perSecond));
        let state: LaneBuckets = { reserved: 0, shared: 0 };
        let now = 1_000_000;
        let start: number | undefined;
        let transactional = 0;
        for (const gap of gaps) {
          now += Math.min(gap, refillMs);
          start ??= now;
          // Promotional always wants far more than the rate; transactional always wants some.
          const take = takeForLanes(state, now, { transactional: 1000, promotional: 100_000 }, rates);
          state = take.state;
          transactional += take.granted.transactional;
        }
        return transactional >= Math.floor((reserved.perSecond * (now - (start as number))) / 1000);
      },
    ),
  );
  t.pass("held");
});

t.test("transactional borrows the shared bucket first in line; promotional waits for the shared refill", async (t) => {
  const rates = splitRate({ perSecond: 10, burst: 10 }, 20);
  const take = takeForLanes({ reserved: 0, shared: 0 }, 1000, { transactional: 5, promotional: 10 }, rates);
  t.same(take.granted, { transactional: 5, promotional: 5 }, "2 from the reserve, 3 + 5 from the shared 8");
  t.equal(take.retryInMs, 125, "the shared bucket refills one token every 125 ms");
  const idle = takeForLanes(take.state, 1000, { transactional: 0, promotional: 0 }, rates);
  t.same(idle.granted, { transactional: 0, promotional: 0 });
  t.equal(idle.retryInMs, 0);
});

t.test("availableTokens: what each lane could take now, without changing anything", async () => {
  fc.assert(
    fc.property(
      limits,
      fc.integer({ min: 0, max: 90 }),
      fc.array(
        fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 20 })),
        {
          maxLength: 30,
        },
      ),
      (limit, reserved, steps) => {
        const rates = splitRate(limit, reserved);
        let state: LaneBuckets = { reserved: 0, shared: 0 };
        let now = 1_000_000;
        for (const [gap, transactional, promotional] of steps) {
          now += gap;
          state = takeForLanes(state, now, { transactional, promotional }, rates).state;
        }
        const available = availableTokens(state, now, rates);
        // Asking for exactly that much is granted in full; one more of either lane is not.
        const alone = (lane: "transactional" | "promotional", n: number) =>
          takeForLanes(state, now, { transactional: 0, promotional: 0, [lane]: n }, rates).granted[lane];
        return (
          alone("transactional", available.transactional + 1) === available.transactional &&
          alone("promotional", available.promotional + 1) === available.promotional &&
          available.transactional >= available.promotional &&
          available.transactional <= limit.burst + 1
        );
      },
    ),
  );
});
