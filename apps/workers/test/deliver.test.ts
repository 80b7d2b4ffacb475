import { randomUUID } from "node:crypto";
import type { WorkItem } from "@notify/core";
import { createSendgridProvider, startSendgridSandbox } from "@notify/providers";
import { captureLogger, freshBus, freshDatabase, streamCount } from "@notify/testing";
import t from "tap";
import { deliver } from "../src/delivery/deliver.js";

// deliver() against a real database, a real NATS namespace and the SendGrid sandbox.
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const guard = await bus.kv("notify_send_guard");
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const deps = {
  database,
  bus,
  guard,
  provider: createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 }),
  log: captureLogger().log,
  maxAttempts: 3,
  retryBaseMs: 100,
  retryMaxMs: 1000,
};

async function workItem(to = "ada@example.com"): Promise<WorkItem> {
  const id = randomUUID();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'c', 'u1', 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  return {
    notification_id: id,
    channel: "email",
    priority: "transactional",
    user_id: "u1",
    category: "account",
    to,
    subject: "Hi",
    body: "<p>Hi</p>",
    attempt: 0,
  };
}
const channel = async (id: string) =>
  (
    await database.sql`select status, provider_id, reason, attempts from notification_channels where notification_id = ${id}`
  )[0];
const sentTo = (id: string) => sandbox.messages().filter((m) => m.custom_args.notification_id === id).length;

t.test("an accepted send is recorded delivered with the provider id", async (t) => {
  const item = await workItem();
  t.same(await deliver(deps, item), { ack: true });
  const row = await channel(item.notification_id);
  t.match(row, { status: "delivered", attempts: 1 });
  t.equal(
    row?.provider_id,
    sandbox.messages().find((m) => m.custom_args.notification_id === item.notification_id)?.message_id,
  );
  t.same(await deliver(deps, item), { ack: true }, "a redelivered item is acknowledged");
  t.equal(sentTo(item.notification_id), 1, "and not sent again");
});

t.test("a claimed guard is never sent through again: the channel shows unsettled", async (t) => {
  const item = await workItem();
  await guard.create(`${item.notification_id}.email`, new TextEncoder().encode("{}"));
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.match(await channel(item.notification_id), { status: "unsettled", reason: "send_outcome_unknown" });
});

t.test("transient failures retry with backoff, release the guard, then dead-letter after N attempts", async (t) => {
  const item = await workItem("flaky@example.com");
  sandbox.fault({ status: 503, match_to: "flaky@example.com" });
  const dlqBefore = await streamCount(bus, bus.streams.dlq);
  for (let attempt = 1; attempt < deps.maxAttempts; attempt++) {
    const disposition = await deliver(deps, item);
    t.ok("retryInMs" in disposition, `attempt ${attempt} is retried`);
    if ("retryInMs" in disposition) t.ok(disposition.retryInMs >= 0 && disposition.retryInMs <= deps.retryMaxMs);
    t.match(await channel(item.notification_id), { status: "retrying", attempts: attempt });
    t.not(
      (await guard.get(`${item.notification_id}.email`))?.operation,
      "PUT",
      "guard released after a definite failure",
    );
  }
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channel(item.notification_id), {
    status: "failed",
    attempts: deps.maxAttempts,
    reason: /^retries exhausted/,
  });
  t.equal(await streamCount(bus, bus.streams.dlq), dlqBefore + 1, "one dead letter");
  const dead = await bus.jsm.streams.getMessage(bus.streams.dlq, { last_by_subj: bus.subjects.dlq("email") });
  const letter = dead?.json<{ item: WorkItem; reason: string; history: unknown[] }>();
  t.equal(letter?.item.notification_id, item.notification_id);
  t.equal(letter?.history.length, deps.maxAttempts, "every attempt is kept");
});

t.test("a permanent failure is dead-lettered at once, without retry", async (t) => {
  const item = await workItem("rejected@example.com");
  sandbox.fault({ status: 400, match_to: "rejected@example.com" });
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channel(item.notification_id), { status: "failed", attempts: 1 });
});

t.test("Retry-After from the provider is honoured", async (t) => {
  const item = await workItem("slow-down@example.com");
  sandbox.fault({ status: 429, retry_after_seconds: 7, match_to: "slow-down@example.com" });
  const disposition = await deliver(deps, item);
  t.ok("retryInMs" in disposition && disposition.retryInMs >= 7000);
});
