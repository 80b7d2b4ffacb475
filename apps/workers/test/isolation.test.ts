import type { WorkItem } from "@notify/core";
import { startSendgridSandbox } from "@notify/devstack";
import { createSendgridProvider } from "@notify/providers";
import { eventually } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { channelRow, fakeProvider, harness, startFakeProviderServer, workItem } from "./helpers.js";

// Invariant 6 with the real pools: the email provider hangs on every call, and SMS, a second
// provider behind its own pool, keeps flowing meanwhile.
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const sms = await startFakeProviderServer(t);
const gates = h.gates([
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 5000 }),
  fakeProvider({ name: "fakesms", channel: "sms", url: sms.url }),
]);
const delivery = await startConsumers({
  ...h.deps(gates[0] as (typeof gates)[0]),
  databases: { transactional: h.database, promotional: h.database },
  gates,
  concurrency: { transactional: 4, promotional: 2 },
});
t.teardown(() => delivery.stop());

const publish = (item: WorkItem) =>
  h.bus.publish(h.bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:${item.channel}`);

t.test("one pool per (channel, lane) for each configured provider", async (t) => {
  t.same(delivery.pools.map((p) => p.durable).sort(), [
    "worker-email-promotional",
    "worker-email-transactional",
    "worker-sms-promotional",
    "worker-sms-transactional",
  ]);
});

t.test("email hangs, SMS keeps flowing", async (t) => {
  sandbox.fault({ delay_ms: 60_000 });
  const emails = await Promise.all(Array.from({ length: 12 }, () => workItem(h.database, { to: "hang@example.com" })));
  for (const item of emails) await publish(item);
  // Every email slot is taken by a hanging call before any SMS is published.
  await eventually(async () => ((await sandboxHeld()) >= 4 ? true : undefined), 10_000, "email pool busy");

  const texts = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      workItem(h.database, { channel: "sms", to: `+1555000${i}`, priority: i % 2 ? "promotional" : "transactional" }),
    ),
  );
  for (const item of texts) await publish(item);
  await eventually(
    async () => {
      const rows = await Promise.all(texts.map((item) => channelRow(h.database, item)));
      return rows.every((row) => row?.status === "delivered") ? true : undefined;
    },
    10_000,
    "every SMS delivered",
  );
  t.equal(sms.received.length, 10, "the SMS provider got all ten");
  const emailRows = await Promise.all(emails.map((item) => channelRow(h.database, item)));
  t.ok(
    emailRows.every((row) => row?.status === "pending"),
    "while no email has got anywhere",
  );
  t.equal(sandbox.messages().length, 0);
});

/** Email calls in flight, as this process's pools report them. */
async function sandboxHeld(): Promise<number> {
  const text = await h.registry.render();
  const match = /^notify_delivery_in_flight\{channel="email",lane="transactional"\} (\d+)$/m.exec(text);
  return Number(match?.[1] ?? 0);
}
