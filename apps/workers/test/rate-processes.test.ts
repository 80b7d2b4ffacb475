import { startSendgridSandbox } from "@notify/devstack";
import { eventually, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { workItem } from "./helpers.js";
import { publish, spawnWorker } from "./process-helpers.js";

// Spec rule 10 with real processes: two workers share SendGrid's token bucket, so together they
// stay within its configured rate; the excess waits and nothing is dropped.
const { database, url } = await freshDatabase(t);
const bus = await freshBus(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const RATE = 20;
const BURST = 4;
const env = { PROVIDER_RATE_LIMITS: `sendgrid=${RATE}:${BURST}`, TRANSACTIONAL_RESERVED_PERCENT: "25" };

t.test("the aggregate send rate of two worker processes stays within the provider's limit", async (t) => {
  const workers = await Promise.all([
    spawnWorker(t, { databaseUrl: url, bus, sandboxUrl: sandbox.url, env }),
    spawnWorker(t, { databaseUrl: url, bus, sandboxUrl: sandbox.url, env }),
  ]);
  const items = await Promise.all(
    Array.from({ length: 80 }, (_, i) =>
      workItem(database, { to: `r${i}@example.com`, priority: i % 4 === 0 ? "transactional" : "promotional" }),
    ),
  );
  for (const item of items) await publish(bus, item);

  await eventually(async () => (sandbox.messages().length === items.length ? true : undefined), 30_000, "all sent");
  const times = sandbox.messages().map((m) => Date.parse(m.received_at));
  const span = (Math.max(...times) - Math.min(...times)) / 1000;
  // Both buckets (reserve and shared) may start full; 0.3 s covers the request latency between a
  // grant and the sandbox's clock.
  const bound = BURST + 1 + RATE * (span + 0.3);
  t.ok(items.length <= bound, `${items.length} sends in ${span.toFixed(2)} s: within ${bound.toFixed(0)} at ${RATE}/s`);
  t.ok(span >= (items.length - BURST - 1) / RATE - 0.3, "so the two did not each send at the full rate");

  const accepted = await Promise.all(
    workers.map(async (w) =>
      Number(
        /^notify_provider_sends_total\{provider="sendgrid",channel="email",result="accepted"\} (\d+)$/m.exec(
          await w.metrics(),
        )?.[1] ?? 0,
      ),
    ),
  );
  t.ok(
    accepted.every((n) => n > 0),
    `both processes sent (${accepted.join(" + ")})`,
  );
  t.equal(
    accepted.reduce((a, b) => a + b, 0),
    items.length,
    "each item once",
  );
  const waits = await Promise.all(
    workers.map(async (w) => /^notify_rate_limit_waits_total\{/m.test(await w.metrics())),
  );
  t.ok(waits.some(Boolean), "the waits show in the metrics");
});
