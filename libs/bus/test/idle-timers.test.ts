import { runConsumer } from "@notify/bus";
import { eventually, freshBus } from "@notify/testing";
import t from "tap";

// An idle process is not woken by the bus: the publisher's ack sweep ticks only while acks are
// awaited and a consumer's heartbeat only while it holds messages, as each wake-up costs a
// process CPU. The intervals the publisher and the consumer runner start are followed through
// setInterval/clearInterval.
const live = new Set<ReturnType<typeof setInterval>>();
const { setInterval: realSet, clearInterval: realClear } = globalThis;
globalThis.setInterval = ((...args: Parameters<typeof setInterval>) => {
  const handle = realSet(...args);
  // Started by the publisher or the runner itself (not by the NATS client they call).
  const caller = (new Error().stack ?? "").split("\n")[2] ?? "";
  if (/libs\/bus\/(dist|src)\/(publisher|consumer)\.[jt]s/.test(caller)) live.add(handle);
  return handle;
}) as typeof setInterval;
globalThis.clearInterval = ((handle?: ReturnType<typeof setInterval>) => {
  if (handle !== undefined) live.delete(handle);
  realClear(handle);
}) as typeof clearInterval;
t.teardown(() => {
  globalThis.setInterval = realSet;
  globalThis.clearInterval = realClear;
});

const bus = await freshBus(t, 1);
const subject = bus.subjects.lane("transactional", 0);
// Longer than one tick of the sweep and of the heartbeat (250 ms at most), which stop themselves.
const quiet = () => new Promise((resolve) => setTimeout(resolve, 700));

t.test("the publisher's ack sweep runs while an ack is awaited, and stops after", async (t) => {
  await quiet();
  const before = live.size;
  const acked = bus.publish(subject, { id: "a" }, "sweep-a");
  t.equal(live.size, before + 1, "a sweep while the ack is awaited");
  await acked;
  await quiet();
  t.equal(live.size, before, "none once every ack came");
});

t.test("a consumer's heartbeat beats while it holds a message, and stops after", async (t) => {
  let release: (() => void) | undefined;
  const runner = await runConsumer({
    bus,
    stream: bus.streams.lane("transactional"),
    durable: "processor-transactional-p0",
    concurrency: 2,
    decode: (msg) => msg.json<{ id: string }>(),
    // The first test's message comes here too, and passes.
    handle: async (value) => {
      if (value.id === "held") await new Promise<void>((resolve) => (release = resolve));
      return { ack: true };
    },
    onError: () => {},
  });
  t.teardown(() => runner.stop());
  await quiet();
  const idle = live.size;
  await bus.publish(subject, { id: "held" }, "heartbeat-held");
  await eventually(async () => (release ? true : undefined), 10_000, "the message in hand");
  await quiet();
  t.equal(live.size, idle + 1, "a heartbeat while it is held");
  release?.();
  await eventually(async () => (runner.inFlight() === 0 ? true : undefined), 10_000, "settled");
  await quiet();
  t.equal(live.size, idle, "none once nothing is held");
});
