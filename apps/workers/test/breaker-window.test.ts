import type { ProviderAnswer } from "@notify/core";
import fc from "fast-check";
import t, { type Test } from "tap";
import { type BreakerSettings, createBreaker, REJECTED } from "../src/providers/breaker.js";

// The breaker's rule, as the settings document it, against every sequence of call outcomes:
// once BREAKER_MIN_CALLS calls were made, a failed (or slow) call opens it when that share of the
// last calls (the window: BREAKER_WINDOW_CALLS, or the minimum when that is larger) failed, or
// as large a share was slow. Once open, calls are turned away without reaching the provider.

const ACCEPTED: ProviderAnswer = { outcome: "accepted", providerId: "p" };
const TRANSIENT: ProviderAnswer = { outcome: "transient", reason: "sendgrid 503", status: 503 };
const countsAsFailure = (result: ProviderAnswer) => result.outcome === "transient";

/** The documented rule: the index of the call after which the breaker is open, or -1. */
function opensAfter(outcomes: readonly boolean[], settings: BreakerSettings): number {
  const size = Math.max(settings.windowCalls, settings.minCalls);
  const window: boolean[] = [];
  for (let i = 0; i < outcomes.length; i++) {
    const failed = outcomes[i] === false;
    window.push(failed);
    if (window.length > size) window.shift();
    if (!failed || window.length < settings.minCalls) continue;
    // In whole numbers: "58 percent or more" of 50 calls is 29 of them, exactly.
    const failures = window.filter(Boolean).length;
    if (failures * 100 >= settings.failurePercent * window.length) return i;
  }
  return -1;
}

t.test("a breaker opens exactly when the share of failures in its window reaches the threshold", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        windowCalls: fc.integer({ min: 1, max: 12 }),
        minCalls: fc.integer({ min: 1, max: 14 }),
        failurePercent: fc.integer({ min: 1, max: 100 }),
      }),
      // true: the provider accepted the call; false: it failed transiently.
      fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }),
      async (rule, outcomes) => {
        const settings = { ...rule, slowCallMs: 60_000, openMs: 600_000, halfOpenProbes: 1 };
        const breaker = createBreaker("model", settings, () => {});
        try {
          const expected = opensAfter(outcomes, settings);
          for (let i = 0; i < outcomes.length; i++) {
            let called = false;
            const answer = await breaker.run(async () => {
              called = true;
              return outcomes[i] ? ACCEPTED : TRANSIENT;
            }, countsAsFailure);
            const open = expected !== -1 && i > expected;
            if (called === open || (answer === REJECTED) !== open) return false;
            if (breaker.state() !== (expected !== -1 && i >= expected ? "open" : "closed")) return false;
          }
          return true;
        } finally {
          breaker.dispose();
        }
      },
    ),
    { numRuns: 300 },
  );
  t.pass("the rule held for every sequence");
});

/** A breaker judging by its last four calls, disposed when the test ends; `rule` adjusts it. */
function fourCallBreaker(t: Test, name: string, rule: Partial<BreakerSettings>) {
  const settings = {
    windowCalls: 4,
    minCalls: 4,
    failurePercent: 50,
    slowCallMs: 60_000,
    openMs: 600_000,
    halfOpenProbes: 1,
  };
  const breaker = createBreaker(name, { ...settings, ...rule }, () => {});
  t.teardown(() => breaker.dispose());
  return breaker;
}

t.test("at 100 percent a breaker opens once every call of its window failed", async (t) => {
  const breaker = fourCallBreaker(t, "all", { failurePercent: 100 });
  const fail = () => breaker.run(async () => TRANSIENT, countsAsFailure);
  await breaker.run(async () => ACCEPTED, countsAsFailure);
  for (let i = 0; i < 3; i++) await fail();
  t.equal(breaker.state(), "closed", "three of four failed");
  await fail();
  t.equal(breaker.state(), "open", "four of four failed");
  t.equal(await fail(), REJECTED);
});

t.test("a share exactly at the threshold opens, whatever floating point makes of it", async (t) => {
  // 29 / 50 * 100 is 57.99999999999999 in floating point.
  const breaker = fourCallBreaker(t, "exact", { windowCalls: 50, minCalls: 50, failurePercent: 58 });
  for (let i = 0; i < 21; i++) await breaker.run(async () => ACCEPTED, countsAsFailure);
  for (let i = 0; i < 28; i++) await breaker.run(async () => TRANSIENT, countsAsFailure);
  t.equal(breaker.state(), "closed", "49 calls: fewer than the minimum");
  await breaker.run(async () => TRANSIENT, countsAsFailure);
  t.equal(breaker.state(), "open", "29 of 50 failed: 58%");
});

t.test("slow calls open a breaker as failures do, each share counted on its own", async (t) => {
  // Slow is 400 ms against a 300 ms limit: a quick call would need a 300 ms stall to count as slow.
  const slowly = async () => {
    await new Promise((resolve) => setTimeout(resolve, 400));
    return ACCEPTED;
  };
  const breaker = fourCallBreaker(t, "slow", { slowCallMs: 300 });
  const quick = () => breaker.run(async () => ACCEPTED, countsAsFailure);
  await quick();
  await quick();
  await breaker.run(slowly, countsAsFailure);
  t.equal(breaker.state(), "closed", "three calls: fewer than the minimum");
  const answer = await breaker.run(slowly, countsAsFailure);
  t.same(answer, ACCEPTED, "a slow call's answer still counts as sent");
  t.equal(breaker.state(), "open", "two slow calls of four");

  const mixed = fourCallBreaker(t, "mixed", { slowCallMs: 300 });
  await mixed.run(async () => ACCEPTED, countsAsFailure);
  await mixed.run(async () => ACCEPTED, countsAsFailure);
  await mixed.run(slowly, countsAsFailure);
  await mixed.run(async () => TRANSIENT, countsAsFailure);
  t.equal(mixed.state(), "closed", "one slow and one failed of four: a quarter each");
});
