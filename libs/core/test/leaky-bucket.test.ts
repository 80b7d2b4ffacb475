import fc from "fast-check";
import t from "tap";
import { leak } from "../src/index.js";

const limits = fc.record({ burst: fc.integer({ min: 1, max: 50 }), perSecond: fc.integer({ min: 1, max: 1000 }) });
const arrivals = fc.array(fc.integer({ min: 0, max: 5000 }), { maxLength: 300 }).map((gaps) => {
  let now = 1_000_000;
  return gaps.map((gap) => (now += gap % 7 === 0 ? 0 : gap));
});

t.test(
  "property: processing never runs faster than the outflow rate, and the queue never exceeds its size",
  async (t) => {
    fc.assert(
      fc.property(limits, arrivals, (l, times) => {
        let drainedAt = 0;
        const processedAt: number[] = [];
        for (const now of times) {
          const { decision, drainedAt: next } = leak(drainedAt, now, l);
          if (decision.allowed) {
            processedAt.push(now + decision.delayMs);
            // Requests queued at this instant, including this one, never exceed the queue size.
            if (decision.delayMs / (1000 / l.perSecond) + 1 > l.burst + 1e-9) return false;
          } else if (next !== drainedAt) return false; // a refusal changes nothing
          drainedAt = next;
        }
        const interval = 1000 / l.perSecond;
        return processedAt.every((at, i) => i === 0 || at - (processedAt[i - 1] as number) >= interval - 1e-6);
      }),
    );
    t.pass("held");
  },
);

t.test("a burst fills the queue, the excess is refused with a Retry-After", async (t) => {
  let drainedAt = 0;
  const decisions = [];
  for (let i = 0; i < 5; i++) {
    const step = leak(drainedAt, 0, { burst: 3, perSecond: 2 });
    drainedAt = step.drainedAt;
    decisions.push(step.decision);
  }
  t.same(
    decisions.map((d) => d.allowed),
    [true, true, true, false, false],
  );
  t.same(
    decisions.slice(0, 3).map((d) => d.delayMs),
    [0, 500, 1000],
    "queued requests leave at the outflow rate",
  );
  t.same(
    decisions.slice(0, 3).map((d) => d.remaining),
    [2, 1, 0],
  );
  t.equal(decisions[3]?.retryAfterSeconds, 1);
  t.ok(leak(drainedAt, 600, { burst: 3, perSecond: 2 }).decision.allowed, "a place frees after one interval");
});
