import { applyTopology, bucketName, connectBus, type TopologyMode } from "@notify/bus";
import { startSendgridSandbox } from "@notify/devstack";
import { createMetrics } from "@notify/http";
import { createSendgridProvider, type OutboundMessage } from "@notify/providers";
import { captureLogger, eventually, freshBus, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { createDeliveryMetrics } from "../src/metrics.js";
import { createGates, type ProviderGate } from "../src/providers/gate.js";

// A nats-server restart loses the memory buckets the workers share (notify_rate, notify_breakers)
// while the work streams stay. Worker processes (each its own connection and gate) go on: their
// next operation puts the buckets back, or, where their NATS user may not create them, each
// keeps the provider's rate on its own until the setup job does. Against the real NATS, the
// buckets' streams deleted under running gates.
const bus = await freshBus(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const OPEN_MS = 1500;
const stream = (bucket: "notify_rate" | "notify_breakers") => `KV_${bucketName(bus.naming, bucket)}`;
const exists = (name: string) =>
  bus.jsm.streams.info(name).then(
    () => true,
    () => false,
  );

async function worker(name: string, topology: TopologyMode = "apply") {
  const own = await connectBus({
    servers: TEST_NATS_URL,
    name,
    namespace: bus.naming.namespace,
    partitions: bus.naming.partitions,
    topology,
  });
  const { log, lines } = captureLogger(name);
  const gates = createGates(
    [createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 })],
    {
      rateKv: await own.kv("notify_rate"),
      breakerKv: await own.kv("notify_breakers"),
      worker: name,
      metrics: createDeliveryMetrics(createMetrics("workers")),
      log,
      settings: {
        rateLimits: {},
        defaultRate: { perSecond: 1000, burst: 1000 },
        transactionalReservedPercent: 20,
        breaker: {
          windowCalls: 10,
          minCalls: 4,
          failurePercent: 50,
          slowCallMs: 60_000,
          openMs: OPEN_MS,
          halfOpenProbes: 1,
        },
        deadlineMs: 4000,
      },
    },
  );
  const gate = gates[0] as ProviderGate;
  t.teardown(async () => {
    gate.close();
    await own.close();
  });
  return { gate, lines };
}
const message = (n: number): OutboundMessage => ({
  notificationId: `n-${n}`,
  channel: "email",
  to: "ada@example.com",
  subject: "Hi",
  body: "<p>Hi</p>",
  category: "news",
  priority: "transactional",
});

t.test("the token buckets and the shared breaker are put back by the workers using them", async (t) => {
  const a = await worker("host:1");
  const b = await worker("host:2");
  await a.gate.limiter.acquire("transactional", 1);

  await bus.jsm.streams.delete(stream("notify_rate"));
  await bus.jsm.streams.delete(stream("notify_breakers"));
  await a.gate.limiter.acquire("transactional", 1);
  await b.gate.limiter.acquire("promotional", 2);
  t.ok(await exists(stream("notify_rate")), "notify_rate is there again");
  const kv = await bus.kv("notify_rate");
  t.equal((await kv.get("sendgrid"))?.operation, "PUT", "and holds the provider's buckets, shared again");

  // The breaker's bucket lost again, alone: a's decision puts it back, and b takes it over.
  await bus.jsm.streams.delete(stream("notify_breakers"));
  sandbox.fault({ status: 503 });
  t.teardown(() => fetch(`${sandbox.url}/sandbox/faults`, { method: "DELETE" }));
  for (let n = 0; n < 4; n++) await a.gate.send(message(n));
  t.equal(a.gate.breaker.state(), "open", "a's own calls failed: a opened");
  await eventually(async () => (b.gate.breaker.state() === "open" ? true : undefined), 5000, "b opens too");
  t.ok(await exists(stream("notify_breakers")), "notify_breakers is there again");
});

t.test("a worker that may not create them keeps the rate on its own until the setup job does", async (t) => {
  const c = await worker("host:3", "verify");
  await c.gate.limiter.acquire("transactional", 1);
  await bus.jsm.streams.delete(stream("notify_rate"));

  for (let n = 0; n < 50; n++) await c.gate.limiter.acquire(n % 2 ? "transactional" : "promotional", 1);
  t.pass("sends go on while the bucket is missing");
  t.notOk(await exists(stream("notify_rate")), "nothing created by a worker that may not");
  const missing = () => c.lines().filter((line) => line.includes("notify_rate) are missing"));
  t.equal(missing().length, 1, "said once, not per send");

  await applyTopology(bus);
  await eventually(
    async () => {
      await c.gate.limiter.acquire("transactional", 1);
      return c.lines().some((line) => line.includes("notify_rate) are back")) ? true : undefined;
    },
    15_000,
    "the shared buckets used again",
  );
  const kv = await bus.kv("notify_rate");
  t.equal((await kv.get("sendgrid"))?.operation, "PUT", "the provider's buckets are shared again");
  t.equal(missing().length, 1, "and the loss was said once");
});
