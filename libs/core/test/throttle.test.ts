import fc from "fast-check";
import t from "tap";
import { type ThrottleSlot, throttleAllows, throttleOutcome, throttleRule } from "../src/index.js";

// The sliding-window decision of per-user throttles, against what the throttle promises.
interface Request {
  id: string;
  at: number;
}

/** Runs requests through the decision in turn, as routing does under the key's lock. */
function run(requests: readonly Request[], rule: { limit: number; perMs: number }) {
  const slots: ThrottleSlot[] = [];
  const granted: boolean[] = [];
  for (const r of requests) {
    const allowed = throttleAllows(slots, r.id, r.at, rule);
    if (allowed && !slots.some((s) => s.notificationId === r.id)) slots.push({ notificationId: r.id, at: r.at });
    granted.push(allowed);
  }
  return { slots, granted };
}

const rule = fc.record({ limit: fc.integer({ min: 1, max: 5 }), perMs: fc.integer({ min: 1, max: 100 }) });
// Few ids, so redeliveries (the same notification again) are common.
const request = fc.record({
  id: fc.constantFrom("a", "b", "c", "d", "e", "f", "g", "h"),
  at: fc.integer({ min: 0, max: 500 }),
});
const inOrder = (requests: Request[]) => [...requests].sort((x, y) => x.at - y.at);

t.test("never more than `limit` slots within any period, whatever order the requests come in", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(rule, fc.array(request, { maxLength: 60 }), (rule, requests) => {
        const { slots } = run(requests, rule);
        // The tightest periods start at a slot: [at, at + per).
        return slots.every((s) => slots.filter((o) => o.at >= s.at && o.at < s.at + rule.perMs).length <= rule.limit);
      }),
    ),
  );
});

t.test("in arrival order, one is turned away only when `limit` went within the period before it", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(rule, fc.array(request, { maxLength: 60 }), (rule, requests) => {
        const ordered = inOrder(requests);
        const slots: ThrottleSlot[] = [];
        return ordered.every((r) => {
          const allowed = throttleAllows(slots, r.id, r.at, rule);
          const held = slots.some((s) => s.notificationId === r.id);
          const recent = slots.filter((s) => s.at > r.at - rule.perMs && s.at <= r.at).length;
          if (allowed && !held) slots.push({ notificationId: r.id, at: r.at });
          return allowed === (held || recent < rule.limit);
        });
      }),
    ),
  );
});

t.test("a redelivery is let through and takes no second slot", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(rule, fc.array(request, { minLength: 1, maxLength: 40 }), fc.nat(), (rule, requests, pick) => {
        const { slots, granted } = run(requests, rule);
        const i = pick % requests.length;
        const again = requests[i] as Request;
        const redelivered = run([...requests, { ...again, at: again.at + 1000 }], rule);
        // A granted one is granted again with nothing added; a refused one is asked anew.
        return granted[i] ? redelivered.granted.at(-1) === true && redelivered.slots.length === slots.length : true;
      }),
    ),
  );
});

t.test("spaced a period apart, every one goes", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(rule, fc.integer({ min: 1, max: 30 }), (rule, n) => {
        const requests = Array.from({ length: n }, (_, i) => ({ id: `n${i}`, at: i * rule.perMs }));
        return run(requests, { ...rule, limit: 1 }).granted.every(Boolean);
      }),
    ),
  );
});

t.test("the boundary: a slot taken exactly a period ago has left the window", async (t) => {
  const slots = [{ notificationId: "a", at: 0 }];
  t.equal(throttleAllows(slots, "b", 999, { limit: 1, perMs: 1000 }), false);
  t.equal(throttleAllows(slots, "b", 1000, { limit: 1, perMs: 1000 }), true);
  t.equal(throttleAllows(slots, "b", -500, { limit: 1, perMs: 1000 }), false, "a slot ahead of the clock counts");
});

t.test("the rule of a request's throttle, and what becomes of one over it", async (t) => {
  t.same(throttleRule({ key: "k", limit: 3, per: "1h" }), { key: "k", limit: 3, perMs: 3_600_000 });
  t.equal(throttleRule(null), null);
  t.equal(throttleRule({ key: "k", limit: 3, per: "2x" }), null, "a period that does not parse throttles nothing");
  t.equal(throttleOutcome({ key: "k", limit: 1, per: "1h" }, false), "none");
  t.equal(throttleOutcome(undefined, true), "none");
  t.equal(throttleOutcome({ key: "k", limit: 1, per: "1h" }, true), "suppress");
  t.equal(throttleOutcome({ key: "k", limit: 1, per: "1h", over_limit: "suppress" }, true), "suppress");
  t.equal(throttleOutcome({ key: "k", limit: 1, per: "1h", over_limit: "digest" }, true), "digest");
});
