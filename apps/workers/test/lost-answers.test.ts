import { TimeoutError } from "@nats-io/transport-node";
import type { KV } from "@notify/bus";
import type { GuardValue, WorkItem } from "@notify/core";
import { eventually } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { deliver } from "../src/delivery/deliver.js";
import { createUnusedClaims } from "../src/delivery/unused-claims.js";
import { channelRow, fakeProvider, harness, startFakeProviderServer, workItem } from "./helpers.js";

// NATS answers late under load: a claim's create lands but its answer times out. The send guard
// must then neither stop the send for good (a claim "sending" that nobody sends under would,
// past its lifetime, leave a notification that was never sent unsettled) nor send twice.
const h = await harness(t);
const provider = await startFakeProviderServer(t);
const [gate] = h.gates([fakeProvider({ name: "fakemail", channel: "email", url: provider.url })]);
if (!gate) throw new Error("no gate");
const sentTo = (to: string) => provider.received.filter((r) => r.to === to).length;
const guardOf = async (item: WorkItem) => (await h.guard.get(`${item.notification_id}.email`))?.json<GuardValue>();

/** The real bucket, but its creates answer with a timeout after writing; and, if asked, reads fail too. */
function losingAnswers(kv: KV, options: { readsFail: () => boolean; createsLose: () => boolean }): KV {
  return new Proxy(kv, {
    get(target, property, receiver) {
      if (property === "create")
        return async (key: string, value: Uint8Array) => {
          const revision = await target.create(key, value);
          if (options.createsLose()) throw new TimeoutError();
          return revision;
        };
      if (property === "get")
        return async (key: string) => {
          if (options.readsFail()) throw new TimeoutError();
          return target.get(key);
        };
      const member = Reflect.get(target, property, receiver);
      return typeof member === "function" ? member.bind(target) : member;
    },
  });
}

t.test("a claim that landed though its answer was lost is found and used: sent once", async (t) => {
  const guard = losingAnswers(h.guard, { createsLose: () => true, readsFail: () => false });
  const deps = h.deps(gate, { guard });
  const item = await workItem(h.database, { to: "landed@example.com" });
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo("landed@example.com"), 1, "sent once");
  t.match(await channelRow(h.database, item), { status: "delivered", attempts: 1 });
  t.match(await guardOf(item), { state: "sent", worker: "test:1" });
});

t.test("when the guard cannot even be read back, the item returns and this process sends it at once", async (t) => {
  let lose = true;
  const guard = losingAnswers(h.guard, { createsLose: () => lose, readsFail: () => lose });
  const deps = h.deps(gate, { guard, unusedClaims: createUnusedClaims() });
  const item = await workItem(h.database, { to: "stranded@example.com" });
  await t.rejects(deliver(deps, item), TimeoutError, "the failure goes back to the consumer, which retries");
  t.match(await guardOf(item), { state: "sending", worker: "test:1" }, "the claim landed");
  t.equal(sentTo("stranded@example.com"), 0);

  // Another worker process cannot know that nothing was sent: to it the claim is live.
  const other = await deliver(h.deps(gate, { worker: "other:2" }), item);
  t.ok("retryInMs" in other, "another process leaves the claim alone");
  t.equal(sentTo("stranded@example.com"), 0);

  lose = false;
  t.same(await deliver(deps, item), { ack: true }, "the redelivery to this process takes over its own claim");
  t.equal(sentTo("stranded@example.com"), 1, "sent once, without waiting out the claim's lifetime");
  t.match(await channelRow(h.database, item), { status: "delivered", attempts: 1 });
  t.same(await deliver(deps, item), { ack: true }, "a later redelivery");
  t.equal(sentTo("stranded@example.com"), 1, "sends nothing");
});

t.test("an unused claim is taken over once, only by the claim it remembers", async (t) => {
  const claims = createUnusedClaims(2);
  claims.remember("a", 1);
  t.notOk(claims.take("a", 2), "another claim on the same key is not it");
  t.ok(claims.take("a", 1));
  t.notOk(claims.take("a", 1), "taken once");
  claims.remember("a", 1);
  claims.remember("b", 2);
  claims.remember("c", 3);
  t.notOk(claims.take("a", 1), "bounded: the oldest is forgotten");
  t.ok(claims.take("c", 3));
});

t.test("the pools log a timed-out dependency as a warning and retry it; a bug as an error", async (t) => {
  let failures = 2;
  const guard = losingAnswers(h.guard, { createsLose: () => false, readsFail: () => false });
  const flaky = new Proxy(guard, {
    get(target, property, receiver) {
      if (property === "create")
        return async (key: string, value: Uint8Array) => {
          if (failures-- > 0) throw failures === 1 ? new TimeoutError() : new TypeError("a bug");
          return target.create(key, value);
        };
      return Reflect.get(target, property, receiver);
    },
  });
  const delivery = await startConsumers({
    ...h.deps(gate, { guard: flaky }),
    databases: { transactional: h.database, promotional: h.database },
    gates: [gate],
    concurrency: { transactional: 1, promotional: 1 },
  });
  t.teardown(() => delivery.stop());
  const item = await workItem(h.database, { to: "retried@example.com" });
  await h.bus.publish(h.bus.subjects.work("email", "transactional"), item, `${item.notification_id}:email`);
  await eventually(
    async () => ((await channelRow(h.database, item))?.status === "delivered" ? true : undefined),
    20_000,
    "delivered after the retries",
  );
  t.equal(sentTo("retried@example.com"), 1);
  const retries = h.log
    .lines()
    .map((line) => JSON.parse(line) as { level: number; msg: string; err?: { type: string } })
    .filter((line) => line.msg.includes("will retry"));
  // pino's levels: 40 warn, 50 error.
  t.same(
    retries.map((line) => [line.level, line.err?.type]),
    [
      [40, "TimeoutError"],
      [50, "TypeError"],
    ],
  );
});
