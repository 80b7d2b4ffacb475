import { type Bus, PublishRejectedError, PublishTimeoutError } from "@notify/bus";
import { freshBus, streamCount } from "@notify/testing";
import t from "tap";
import { createPublisher } from "../src/publisher.js";

// bus.publish against the real NATS: the message id is what makes a retried publish harmless.
const bus: Bus = await freshBus(t, 1);
const subject = bus.subjects.work("sms", "promotional");

t.test("a publish repeated with the same message id is stored once", async (t) => {
  const first = await bus.publish(subject, { n: 1 }, "same-id");
  t.equal(first.duplicate, false);
  t.ok(first.seq > 0);
  const again = await bus.publish(subject, { n: 1 }, "same-id");
  t.equal(again.duplicate, true, "the server saw it within its duplicate window");
  t.equal(again.seq, first.seq, "and answers with the stored message's sequence");
  const other = await bus.publish(subject, { n: 2 }, "other-id");
  t.equal(other.duplicate, false);
  t.ok(other.seq > first.seq);
  t.equal(await streamCount(bus, bus.streams.work), 2);
});

t.test("concurrent publishes with one id store one message between them", async (t) => {
  const before = await streamCount(bus, bus.streams.work);
  const acks = await Promise.all(Array.from({ length: 20 }, () => bus.publish(subject, { n: 3 }, "racing-id")));
  t.equal(acks.filter((a) => !a.duplicate).length, 1, "one stored");
  t.equal(new Set(acks.map((a) => a.seq)).size, 1, "all acks name it");
  t.equal(await streamCount(bus, bus.streams.work), before + 1);
});

t.test("a subject no stream captures is rejected, not lost silently", async (t) => {
  const error = await bus.publish(`${bus.naming.namespace}.nowhere`, { n: 4 }, "x").catch((e: unknown) => e);
  t.type(error, PublishRejectedError);
  t.equal((error as PublishRejectedError).status, 503);
});

t.test("an ack that never comes times out, again after an idle spell", async (t) => {
  // A subscriber that never answers: the publish reaches someone, its ack never comes. The
  // time-out sweep runs only while acks are awaited; after an idle spell it must start again.
  const silent = `${bus.naming.namespace}.silent`;
  const sub = bus.nc.subscribe(silent, { callback: () => {} });
  t.teardown(() => sub.unsubscribe());
  const publisher = createPublisher(bus.nc, 100);
  t.teardown(() => publisher.close());
  const timedOut = async () => {
    const started = Date.now();
    const error = await publisher.publish(silent, new Uint8Array([1]), "m").catch((e: unknown) => e);
    return { error, ms: Date.now() - started };
  };
  const first = await timedOut();
  t.type(first.error, PublishTimeoutError);
  t.ok(first.ms >= 100, "not before its time-out");
  await new Promise((resolve) => setTimeout(resolve, 300));
  const second = await timedOut();
  t.type(second.error, PublishTimeoutError, "timed out after the idle spell too");
});

t.test("a publish after the publisher closed is refused at once, not left waiting", async (t) => {
  const publisher = createPublisher(bus.nc, 60_000);
  publisher.close();
  const outcome = await Promise.race([
    publisher.publish(subject, new Uint8Array([1]), "after-close").catch((e: unknown) => e),
    new Promise((resolve) => setTimeout(() => resolve("still waiting"), 2000)),
  ]);
  t.type(outcome, PublishTimeoutError);
});
