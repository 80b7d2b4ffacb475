import { applyTopology, type Bus, runConsumer } from "@notify/bus";
import { eventually, freshBus } from "@notify/testing";
import t from "tap";

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
    handle: async (msg) => {
      handled.push(msg.json<{ id: string }>().id);
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
