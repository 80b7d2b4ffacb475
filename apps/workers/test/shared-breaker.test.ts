import { connectBus } from "@notify/bus";
import { startSendgridSandbox } from "@notify/devstack";
import { createMetrics } from "@notify/http";
import { createSendgridProvider, type OutboundMessage } from "@notify/providers";
import { captureLogger, eventually, freshBus, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { createDeliveryMetrics } from "../src/metrics.js";
import { createGates, type ProviderGate } from "../src/providers/gate.js";

// Two worker processes (each its own NATS connection, breaker and gate) calling one provider:
// when one's breaker opens on its own failed calls, the other parks its work too without
// spending a call on the provider; when the first's probe finds it well and closes, so does the
// other. The decisions travel through notify_breakers.
const bus = await freshBus(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const OPEN_MS = 1500;

async function worker(name: string): Promise<ProviderGate> {
  const own = await connectBus({
    servers: TEST_NATS_URL,
    name,
    namespace: bus.naming.namespace,
    partitions: bus.naming.partitions,
  });
  const gates = createGates(
    [createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 })],
    {
      rateKv: await own.kv("notify_rate"),
      breakerKv: await own.kv("notify_breakers"),
      worker: name,
      metrics: createDeliveryMetrics(createMetrics("workers")),
      log: captureLogger(name).log,
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
  return gate;
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

t.test("a breaker opened by one worker parks the others' work, and its close lets it through", async (t) => {
  const a = await worker("host:1");
  const b = await worker("host:2");
  sandbox.fault({ status: 503 });
  for (let n = 0; n < 4; n++) await a.send(message(n));
  t.equal(a.breaker.state(), "open", "a's own calls failed: a opened");
  await eventually(async () => (b.breaker.state() === "open" ? true : undefined), 3000, "b opens too");
  t.match(await b.send(message(9)), { kind: "skipped" }, "b does not call a provider known to be down");

  // After the open period a's probe finds the provider well; b follows its close.
  await fetch(`${sandbox.url}/sandbox/faults`, { method: "DELETE" });
  await new Promise((resolve) => setTimeout(resolve, OPEN_MS + 100));
  t.match(await a.send(message(10)), { kind: "accepted" }, "a's probe goes through");
  t.equal(a.breaker.state(), "closed");
  await eventually(async () => (b.breaker.state() === "closed" ? true : undefined), 3000, "b closes too");
  t.match(await b.send(message(11)), { kind: "accepted" });
});

t.test("a worker starting long after an outage ended is not opened by the old decision", async (t) => {
  const kv = await bus.kv("notify_breakers");
  await kv.put("sendgrid", JSON.stringify({ state: "open", by: "gone:1", at: Date.now() - 10 * OPEN_MS }));
  const c = await worker("host:3");
  await new Promise((resolve) => setTimeout(resolve, 1000));
  t.equal(c.breaker.state(), "closed");
});
