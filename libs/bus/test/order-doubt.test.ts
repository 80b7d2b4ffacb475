import fc from "fast-check";
import t from "tap";
import { createOrderWatch } from "../src/order-doubt.js";

// The order watch against a second statement of the rule: a delivery is in doubt when the
// runner started, or some sign of disorder came, less than the doubt window before it.
type Step =
  | { kind: "next"; wait: number }
  | { kind: "gap"; by: number; wait: number }
  | { kind: "back"; by: number; wait: number }
  | { kind: "redelivery"; wait: number }
  | { kind: "sentBack"; wait: number }
  | { kind: "restarted"; wait: number };

const wait = fc.integer({ min: 0, max: 400 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("next" as const), wait }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("gap" as const), by: fc.integer({ min: 2, max: 5 }), wait }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("back" as const), by: fc.integer({ min: 0, max: 5 }), wait }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("redelivery" as const), wait }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("sentBack" as const), wait }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restarted" as const), wait }) },
);

t.test("a delivery is in doubt exactly within the window after the start or a sign of disorder", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 50, max: 1000 }),
      fc.option(fc.record({ lastDelivered: fc.nat(1000), inHand: fc.nat(3) }), { nil: undefined }),
      fc.array(step, { maxLength: 60 }),
      (doubtMs, start, steps) => {
        let clock = 0;
        const watch = createOrderWatch(doubtMs, () => clock, start);
        // Unknown, or deliveries still in someone's hand: the start is a sign.
        const signs: number[] = start === undefined || start.inHand > 0 ? [0] : [];
        let seq = start?.lastDelivered ?? 0;
        let known = start !== undefined;
        for (const s of steps) {
          clock += s.wait;
          if (s.kind === "sentBack" || s.kind === "restarted") {
            watch[s.kind]();
            signs.push(clock);
            continue;
          }
          if (s.kind === "next" || s.kind === "redelivery") seq += 1;
          else if (s.kind === "gap") seq += s.by;
          else seq = Math.max(0, seq - s.by);
          // Before the first delivery of an unknown start there is nothing to follow.
          const disorder = s.kind === "redelivery" || (known && s.kind !== "next");
          known = true;
          if (disorder) signs.push(clock);
          const expected = signs.some((at) => clock - at < doubtMs);
          const got = watch.delivered({ deliverySequence: seq, deliveryCount: s.kind === "redelivery" ? 2 : 1 });
          if (got !== expected) return false;
        }
        return true;
      },
    ),
    { numRuns: 500 },
  );
  t.pass("500 runs agree with the rule");
});

t.test("a runner's own steady deliveries are not in doubt once the start is past", async (t) => {
  let clock = 0;
  const watch = createOrderWatch(100, () => clock, { lastDelivered: 0, inHand: 1 });
  t.ok(watch.delivered({ deliverySequence: 1, deliveryCount: 1 }), "in doubt at a start with deliveries in hand");
  clock = 150;
  for (let seq = 2; seq < 50; seq++) t.notOk(watch.delivered({ deliverySequence: seq, deliveryCount: 1 }));
  t.ok(watch.delivered({ deliverySequence: 52, deliveryCount: 1 }), "a delivery missing in between");
  clock = 300;
  t.notOk(watch.delivered({ deliverySequence: 53, deliveryCount: 1 }), "the window passes");
});

t.test("a start with nothing in hand is not in doubt, unless its first delivery skips one", async (t) => {
  const quiet = createOrderWatch(100, () => 0, { lastDelivered: 7, inHand: 0 });
  t.notOk(quiet.delivered({ deliverySequence: 8, deliveryCount: 1 }));
  const skipped = createOrderWatch(100, () => 0, { lastDelivered: 7, inHand: 0 });
  t.ok(skipped.delivered({ deliverySequence: 9, deliveryCount: 1 }), "delivery 8 went to a reader gone since");
});
