import { claimGuard, readGuard } from "@notify/bus";
import type { GuardValue, WorkItem } from "@notify/core";
import { startSendgridSandbox } from "@notify/devstack";
import { cancelChannels, planReplay, replay } from "@notify/ops";
import { createSendgridProvider } from "@notify/providers";
import { eventually, streamCount } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { deliver } from "../src/delivery/deliver.js";
import { channelRow, deadLetters, harness, statusHistory, workItem } from "./helpers.js";

// A cancel (libs/ops cancelChannels, what the processor runs for POST …/cancel) against the
// workers' own delivery: a channel canceled while its work item waits in the queue is never
// sent, whenever a worker takes the item; one a worker holds or sent stays as it is.
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const sendgrid = () =>
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 });
const [gate] = h.gates([sendgrid()]);
if (!gate) throw new Error("no gate");
const deps = h.deps(gate);
const { database, guard, bus } = h;

// workItem() stores the notification for client 'c'.
const cancel = (item: WorkItem) =>
  cancelChannels(
    { database, guard },
    { notification_id: item.notification_id, requested_by: { key_id: "k", client_id: "c" } },
  );
const sentTo = (id: string) => sandbox.messages().filter((m) => m.custom_args.notification_id === id).length;
const guardOf = async (item: WorkItem) => (await readGuard(guard, `${item.notification_id}.${item.channel}`))?.value;
const attempts = async (item: WorkItem) =>
  Number(
    (
      await database.sql`select count(*)::int as n from delivery_attempts where notification_id = ${item.notification_id}`
    )[0]?.n,
  );
const publish = (item: WorkItem) =>
  bus.publish(bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:${item.channel}`);

t.test(
  "queued while the workers are stopped: canceled, then acknowledged by the real pools with nothing sent",
  async (t) => {
    const items = [await workItem(database), await workItem(database)];
    const [doomed, kept] = items as [WorkItem, WorkItem];
    for (const item of items) await publish(item);
    t.same(await cancel(doomed), { outcome: "done", channels: { email: { result: "canceled", why: null } } });
    t.match(await guardOf(doomed), { state: "canceled", reason: "canceled_by_client" }, "the guard says canceled");
    t.match(await channelRow(database, doomed), { status: "canceled", reason: "canceled_by_client", attempts: 0 });

    // The workers start now, and take both items (gates of their own: stopping them closes those).
    const gates = h.gates([sendgrid()]);
    const delivery = await startConsumers({
      ...h.deps(gates[0] as (typeof gates)[0]),
      databases: { transactional: database, promotional: database },
      gates,
      concurrency: { transactional: 2, promotional: 2 },
    });
    t.teardown(() => delivery.stop());
    await eventually(async () => ((await channelRow(database, kept))?.status === "delivered" ? true : undefined));
    await eventually(async () => ((await streamCount(bus, bus.streams.work)) === 0 ? true : undefined));
    t.equal(sentTo(kept.notification_id), 1, "the other one was sent");
    t.equal(sentTo(doomed.notification_id), 0, "the canceled one never reached the provider");
    t.match(await channelRow(database, doomed), { status: "canceled", attempts: 0 });
    t.equal(await attempts(doomed), 0, "no attempt recorded");
    t.same(await deadLetters(bus, doomed.notification_id), [], "no dead letter");
    t.same(
      (await statusHistory(database, doomed)).map((e) => e.status),
      ["canceled"],
      "its history is the cancel alone",
    );
    await delivery.stop();
  },
);

t.test("a worker that read the channel before the cancel finds the guard canceled and sends nothing", async (t) => {
  // The cancel took the guard but its status write was lost (or the worker read the row first):
  // the guard alone stops the send, and the channel follows it.
  const item = await workItem(database);
  await guard.create(
    `${item.notification_id}.email`,
    new TextEncoder().encode(JSON.stringify({ state: "canceled", at: Date.now(), attempt: 0 } satisfies GuardValue)),
  );
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.equal(await attempts(item), 0);
  t.match(await channelRow(database, item), { status: "canceled", reason: "canceled_by_client" });
  t.same(await deliver(deps, item), { ack: true }, "a redelivery too");
  t.equal(sentTo(item.notification_id), 0);
  t.match(
    await cancel(item),
    { outcome: "done", channels: { email: { result: "already_canceled" } } },
    "and a cancel sees it done",
  );
});

t.test("a retry due (guard failed) is canceled by a compare-and-set; its retry sends nothing", async (t) => {
  const item = await workItem(database);
  await database.sql`update notification_channels set status = 'retrying', attempts = 1
    where notification_id = ${item.notification_id}`;
  await guard.create(
    `${item.notification_id}.email`,
    new TextEncoder().encode(
      JSON.stringify({ state: "failed", at: Date.now(), attempt: 1, reason: "503" } satisfies GuardValue),
    ),
  );
  t.same(await cancel(item), { outcome: "done", channels: { email: { result: "canceled", why: null } } });
  t.match(await guardOf(item), { state: "canceled", attempt: 1 });
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.match(await channelRow(database, item), { status: "canceled", attempts: 1 });
});

t.test("a cancel racing a worker's claim: the claim at the revision the cancel read wins or loses whole", async (t) => {
  const item = await workItem(database);
  const key = `${item.notification_id}.email`;
  const failed: GuardValue = { state: "failed", at: Date.now(), attempt: 1 };
  await guard.create(key, new TextEncoder().encode(JSON.stringify(failed)));
  const seen = await readGuard(guard, key);
  // A worker claims first, at the revision both read: the cancel's compare-and-set then fails,
  // it reads again and leaves the send alone.
  t.ok(await claimGuard(guard, key, seen, { state: "sending", at: Date.now(), attempt: 2, worker: "w:1" }));
  t.same(await cancel(item), {
    outcome: "done",
    channels: { email: { result: "not_canceled", why: "being sent (send guard: sending)" } },
  });
  t.match(await channelRow(database, item), { status: "pending" }, "untouched");
  // The cancel's own write at the old revision is refused, as the worker's would be after a cancel.
  t.equal(await claimGuard(guard, key, seen, { state: "canceled", at: Date.now(), attempt: 1 }), null);
});

t.test("a channel sent stays as it is; a canceled one is never replayed", async (t) => {
  const sent = await workItem(database);
  t.same(await deliver(deps, sent), { ack: true });
  t.same(await cancel(sent), {
    outcome: "done",
    channels: { email: { result: "not_canceled", why: "already delivered" } },
  });
  t.match(await channelRow(database, sent), { status: "delivered" });
  t.match(await guardOf(sent), { state: "sent" });
  t.equal(sentTo(sent.notification_id), 1);

  const canceled = await workItem(database);
  await cancel(canceled);
  const letter = {
    item: canceled,
    channel: canceled.channel,
    class: "permanent" as const,
    reason: "x",
    provider: "sendgrid",
    attempts: 0,
    failed_at: new Date().toISOString(),
    history: [],
  };
  const plan = await planReplay(
    { database, guard, criticalCategories: [], now: new Date() },
    letter as never,
    { status: "canceled", reason: "canceled_by_client", attempts: 0 } as never,
    true,
  );
  t.same(plan, { action: "skip", why: "channel is canceled" }, "the plan skips it");
  t.equal(
    await replay({ database, bus, guard }, canceled, true),
    "its client canceled it (send guard: canceled)",
    "and a replay refuses it",
  );
  t.match(await guardOf(canceled), { state: "canceled" }, "the guard is not released");
  t.match(await channelRow(database, canceled), { status: "canceled" });
});
