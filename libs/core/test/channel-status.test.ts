import fc from "fast-check";
import t from "tap";
import { CHANNEL_STATUSES, canTransition, isFinal, statusesMovableTo } from "../src/index.js";

t.test("status only moves forward: no cycle of transitions exists", async (t) => {
  const status = fc.constantFrom(...CHANNEL_STATUSES);
  fc.assert(
    fc.property(
      status,
      status,
      (a, b) =>
        !(canTransition(a, b) && canTransition(b, a)) ||
        (["retrying", "parked", "deferred"].includes(a) && ["retrying", "parked", "deferred"].includes(b)),
    ),
  );
  t.pass("only the waiting statuses may swap");
});

t.test("the state table's transitions are allowed", async (t) => {
  t.ok(canTransition("pending", "delivered"));
  t.ok(canTransition("pending", "retrying"));
  t.ok(canTransition("retrying", "parked"));
  t.ok(canTransition("parked", "retrying"));
  t.ok(canTransition("retrying", "failed"));
  t.ok(canTransition("delivered", "bounced"), "a receipt may report a bounce after the send");
  t.ok(canTransition("unsettled", "delivered"), "a receipt settles an unknown outcome");
});

t.test("late updates never regress a final status", async (t) => {
  for (const final of CHANNEL_STATUSES.filter(isFinal)) {
    t.notOk(canTransition(final, "pending"), `${final} -> pending`);
    t.notOk(canTransition(final, "retrying"), `${final} -> retrying`);
  }
  t.notOk(canTransition("bounced", "delivered"));
  t.notOk(canTransition("delivered", "delivered"), "a final status does not repeat");
  t.ok(canTransition("retrying", "retrying"), "another retry is recorded");
  t.same(statusesMovableTo("delivered").sort(), ["deferred", "parked", "pending", "retrying", "unsettled"].sort());
  t.same(statusesMovableTo("retrying").sort(), ["deferred", "parked", "pending", "retrying"].sort());
});

t.test("a cancel reaches only a waiting channel, and nothing follows it", async (t) => {
  const waiting = ["pending", "deferred", "retrying", "parked"];
  for (const from of CHANNEL_STATUSES) {
    t.equal(canTransition(from, "canceled"), waiting.includes(from), `${from} -> canceled`);
    for (const to of CHANNEL_STATUSES) t.notOk(canTransition("canceled", to), `canceled -> ${to}`);
  }
  t.ok(isFinal("canceled"), "canceled is final");
  t.notOk(canTransition("unsettled", "canceled"), "an unsettled channel may have been accepted");
  t.notOk(canTransition("canceled", "bounced"), "never sent, so never bounced");
  t.same(statusesMovableTo("canceled").sort(), [...waiting].sort());
  t.notOk(statusesMovableTo("bounced").includes("canceled"), "a bounce receipt never moves a canceled channel");
  t.notOk(statusesMovableTo("delivered").includes("canceled"), "nor does a late delivery");
});
