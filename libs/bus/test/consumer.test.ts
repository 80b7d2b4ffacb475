import { applyTopology, type Bus, decodeJson, readPoisonMessages, runConsumer } from "@notify/bus";
import { eventually, freshBus } from "@notify/testing";
import t from "tap";
import { POISON_HEADERS } from "../src/poison.js";

// The consumer runner against the real NATS: a lost consumer makes it unhealthy (readiness says
// so) and it pulls again once the consumer is back, instead of idling while "ready".
const bus: Bus = await freshBus(t, 1);
const stream = bus.streams.lane("transactional");
const durable = "processor-transactional-p0";
const subject = bus.subjects.lane("transactional", 0);

t.test("a runner whose consumer is deleted reports unhealthy, puts it back and resumes", async (t) => {
  const handled: string[] = [];
  const lost: unknown[] = [];
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 4,
    decode: (msg) => msg.json<{ id: string }>(),
    handle: async (value) => {
      handled.push(value.id);
      return { ack: true };
    },
    onError: () => {},
    onLost: (error) => lost.push(error),
  });
  t.teardown(() => runner.stop());

  await bus.publish(subject, { id: "a" }, "a");
  await eventually(async () => (handled.includes("a") ? true : undefined), 10_000, "the first message");
  t.ok(runner.healthy(), "healthy while pulling");

  await bus.jsm.consumers.delete(stream, durable);
  await eventually(async () => (runner.healthy() ? undefined : true), 30_000, "the runner to notice");
  t.ok(lost.length > 0, "the loss is reported to the app");

  await bus.publish(subject, { id: "b" }, "b");
  await eventually(async () => (runner.healthy() ? true : undefined), 30_000, "healthy again");
  await eventually(async () => (handled.includes("b") ? true : undefined), 10_000, "resumed");
  t.same(handled, ["a", "b"], "nothing handled twice, nothing skipped");
});

t.test("stop() ends a runner at once, even while it is waiting to get its consumer back", async (t) => {
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 1,
    decode: (msg) => msg.data,
    handle: async () => ({ ack: true }),
    onError: () => {},
  });
  await bus.jsm.consumers.delete(stream, durable);
  await eventually(async () => (runner.healthy() ? undefined : true), 30_000, "the runner to notice");
  const started = Date.now();
  await runner.stop();
  t.ok(Date.now() - started < 2000, "stopped without waiting out the backoff");
  await applyTopology(bus);
});

t.test(
  "bytes that cannot be decoded or validated are set aside with the reason and acked, never looped on",
  async (t) => {
    const handled: string[] = [];
    const poisoned: string[] = [];
    const errors: unknown[] = [];
    const runner = await runConsumer({
      bus,
      stream,
      durable,
      concurrency: 4,
      decode: (msg) =>
        decodeJson<{ id: string; user: string }>(msg, (value) =>
          typeof (value as { id?: unknown })?.id === "string" ? null : "id must be a string",
        ),
      keyOf: (value) => value.user,
      handle: async (value) => {
        handled.push(value.id);
        return { ack: true };
      },
      onError: (error) => errors.push(error),
      onPoison: (reason) => poisoned.push(reason),
    });
    t.teardown(() => runner.stop());

    const raw = new Uint8Array([0x7b, 0xff, 0xfe, 0x00, 0x22]);
    await bus.js.publish(subject, raw, { msgID: "poison-raw" });
    await bus.js.publish(subject, new TextEncoder().encode("not json"), { msgID: "poison-text" });
    await bus.publish(subject, { id: 7, user: "u" }, "poison-invalid");
    await bus.publish(subject, { id: "after", user: "u" }, "after");
    await eventually(async () => (handled.includes("after") ? true : undefined), 10_000, "the good message");
    await eventually(async () => (poisoned.length === 3 ? true : undefined), 10_000, "three set aside");
    t.same(handled, ["after"], "the good message after them is handled, the bad ones are not");
    t.same(errors, [], "no handler error, no retry loop");
    t.match(poisoned, [/not UTF-8 JSON/, /not UTF-8 JSON/, /invalid: id must be a string/]);

    const info = await bus.jsm.consumers.info(stream, durable);
    t.equal(info.num_ack_pending, 0, "every message acknowledged");
    t.equal(info.num_pending, 0, "nothing left to deliver");

    const kept = await readPoisonMessages(bus);
    t.equal(kept.length, 3, "each poison message kept once");
    const first = kept[0];
    t.same([...(first?.data ?? [])], [...raw], "with its raw bytes");
    t.equal(first?.stream, stream, "its stream");
    t.equal(first?.subject, subject, "its subject");
    t.equal(first?.consumer, durable, "the consumer that met it");
    t.ok((first?.sourceSeq ?? 0) > 0, "its sequence there");
    t.match(first?.reason, /not UTF-8 JSON/, "and the reason");
    const stored = await bus.jsm.streams.getMessage(bus.streams.dlq, { seq: first?.seq ?? 0 });
    t.ok(stored?.header.get(POISON_HEADERS.deliveries), "the delivery count is a header too");
    t.match(stored?.subject, /notify\.dlq\.poison\./, "on the poison subject, apart from the channel dead letters");
  },
);

t.test("a message whose key cannot be read is set aside, not held with its slot taken", async (t) => {
  const handled: string[] = [];
  const poisoned: string[] = [];
  const lost: unknown[] = [];
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 1,
    decode: (msg) => decodeJson<{ id: string; user?: { name: string } }>(msg, () => null),
    // Reads a field the value's check did not require: throws for a message without it.
    keyOf: (value) => (value.user as { name: string }).name,
    handle: async (value) => {
      handled.push(value.id);
      return { ack: true };
    },
    onError: () => {},
    onPoison: (reason) => poisoned.push(reason),
    onLost: (error) => lost.push(error),
  });
  t.teardown(() => runner.stop());
  await bus.publish(subject, { id: "keyless" }, "keyless");
  await bus.publish(subject, { id: "keyed", user: { name: "u" } }, "keyed");
  await eventually(async () => (handled.includes("keyed") ? true : undefined), 10_000, "the next message");
  t.same(handled, ["keyed"], "the next message is handled with the only slot");
  t.match(poisoned, [/no key: TypeError/], "the keyless one set aside with the reason");
  t.same(lost, [], "the pull carried on");
  t.equal(runner.inFlight(), 0, "nothing left in hand");
  const info = await bus.jsm.consumers.info(stream, durable);
  t.equal(info.num_ack_pending, 0, "both acknowledged");
  const kept = await readPoisonMessages(bus);
  t.ok(
    kept.some((k) => k.reason?.startsWith("no key")),
    "kept on the poison subject for the replay tool",
  );
});

t.test("a held message is kept in progress past the ack wait, and not redelivered meanwhile", async (t) => {
  const ackWaitMs = 1500;
  await bus.jsm.consumers.update(stream, durable, { ack_wait: ackWaitMs * 1_000_000 });
  t.teardown(() => applyTopology(bus));
  const seen: number[] = [];
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 1,
    decode: (msg) => msg.json<{ id: string }>(),
    handle: async (_value, msg) => {
      seen.push(msg.info.deliveryCount);
      await new Promise((r) => setTimeout(r, ackWaitMs * 3));
      return { ack: true };
    },
    onError: () => {},
  });
  t.teardown(() => runner.stop());
  await bus.publish(subject, { id: "slow" }, "slow");
  await eventually(async () => (runner.inFlight() === 0 && seen.length > 0 ? true : undefined), 15_000, "handled");
  await new Promise((r) => setTimeout(r, ackWaitMs));
  t.same(seen, [1], "delivered once: the heartbeat held it through three ack waits");
});

t.test("a keyed message whose handler fails is retried in place, so the next of its key never passes it", async (t) => {
  const handled: string[] = [];
  const errors: string[] = [];
  let failuresLeft = 2;
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 4,
    decode: (msg) => decodeJson<{ id: string; user: string }>(msg, () => null),
    keyOf: (value) => value.user,
    handle: async (value) => {
      // A dependency times out twice on the first message (a NATS node failing over).
      if (value.id === "first" && failuresLeft-- > 0) throw new Error("timeout");
      handled.push(value.id);
      return { ack: true };
    },
    onError: (error) => errors.push(String(error)),
  });
  t.teardown(() => runner.stop());
  await bus.publish(subject, { id: "first", user: "ordered" }, "ordered-1");
  await bus.publish(subject, { id: "second", user: "ordered" }, "ordered-2");
  await bus.publish(subject, { id: "other", user: "someone else" }, "ordered-3");
  await eventually(async () => (handled.length === 3 ? true : undefined), 15_000, "all three handled");
  t.equal(errors.length, 2, "both failures reported");
  t.ok(handled.indexOf("first") < handled.indexOf("second"), "the key's order held through the failures");
  t.equal(handled.indexOf("other"), 0, "another key did not wait for it");
  const info = await bus.jsm.consumers.info(stream, durable);
  t.equal(info.num_redelivered, 0, "nothing went back to the queue");
});

t.test("deliveries are in doubt at the start and when another reader takes some, not in a steady run", async (t) => {
  const seen: Array<{ runner: string; id: string; orderInDoubt: boolean }> = [];
  const start = (name: string) =>
    runConsumer({
      bus,
      stream,
      durable,
      concurrency: 1,
      orderDoubtMs: 300,
      decode: (msg) => msg.json<{ id: string }>(),
      keyOf: (value) => value.id,
      handle: async (value, _msg, delivery) => {
        seen.push({ runner: name, id: value.id, orderInDoubt: delivery.orderInDoubt });
        return { ack: true };
      },
      onError: () => {},
    });
  const publish = async (prefix: string, count: number) => {
    for (let i = 0; i < count; i++) await bus.publish(subject, { id: `${prefix}${i}` }, `${prefix}${i}`);
  };
  const handled = (prefix: string, count: number) =>
    eventually(
      async () => (seen.filter((s) => s.id.startsWith(prefix)).length >= count ? true : undefined),
      10_000,
      `${count} of ${prefix}`,
    );

  // A reader that died with a message in hand (taken, never acknowledged): a runner starting on
  // the consumer is in doubt, since that message comes back after the ack wait behind others.
  await publish("taken", 1);
  const taken = await (await bus.js.consumers.get(stream, durable)).next({ expires: 5000 });
  t.ok(taken, "the dead reader's message");
  const one = await start("one");
  await publish("early", 1);
  await handled("early", 1);
  t.ok(seen.find((s) => s.id === "early0")?.orderInDoubt, "in doubt: a delivery still in another's hand");
  await handled("taken", 1);
  await new Promise((resolve) => setTimeout(resolve, 400));
  await publish("steady", 20);
  await handled("steady", 20);
  t.same(
    seen.filter((s) => s.id.startsWith("steady") && s.orderInDoubt),
    [],
    "one reader, deliveries one after another: none in doubt",
  );

  // A second reader of the same consumer takes some of the deliveries: each runner sees gaps.
  const two = await start("two");
  await new Promise((resolve) => setTimeout(resolve, 400));
  await publish("shared", 40);
  await handled("shared", 40);
  const shared = seen.filter((s) => s.id.startsWith("shared"));
  t.ok(new Set(shared.map((s) => s.runner)).size === 2, "both readers got some");
  t.ok(
    shared.some((s) => s.runner === "one" && s.orderInDoubt),
    "the first runner put the deliveries after a gap in doubt",
  );
  await Promise.all([one.stop(), two.stop()]);
});

t.test("a message behind one of its key that was sent back is in doubt when it is handled", async (t) => {
  const calls: Array<{ id: string; orderInDoubt: boolean }> = [];
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 4,
    orderDoubtMs: 300,
    decode: (msg) => msg.json<{ id: string }>(),
    keyOf: (value) => value.id.split("-")[0] as string,
    handle: async (value, _msg, delivery) => {
      calls.push({ id: value.id, orderInDoubt: delivery.orderInDoubt });
      // The first one takes a while (k-2 arrives meanwhile), fails for now and goes back to the queue.
      if (calls.length === 1) await new Promise((resolve) => setTimeout(resolve, 300));
      return value.id === "k-1" && calls.filter((c) => c.id === "k-1").length === 1
        ? { retryInMs: 1000 }
        : { ack: true };
    },
    onError: () => {},
  });
  t.teardown(() => runner.stop());
  await new Promise((resolve) => setTimeout(resolve, 400));
  await bus.publish(subject, { id: "k-1" }, "k-1");
  await bus.publish(subject, { id: "k-2" }, "k-2");
  await eventually(async () => (calls.filter((c) => c.id === "k-1").length === 2 ? true : undefined), 10_000);
  t.same(calls[0], { id: "k-1", orderInDoubt: false }, "arrived in a steady run");
  t.same(
    calls.find((c) => c.id === "k-2"),
    { id: "k-2", orderInDoubt: true },
    "k-2 arrived in a steady run too, but k-1 ahead of it went back: it may now pass k-1",
  );
});
