import { setTimeout as sleep } from "node:timers/promises";
import type { Disposition } from "@notify/bus";
import type { GuardValue, WorkItem } from "@notify/core";
import { startSendgridSandbox } from "@notify/devstack";
import { createSendgridProvider } from "@notify/providers";
import t from "tap";
import { deliver } from "../src/delivery/deliver.js";
import { channelRow, harness, statusHistory, workItem } from "./helpers.js";

// Deliver-by deadlines in the worker, against a real database, NATS and the SendGrid sandbox:
// nothing is sent once the deadline has passed, whatever held the item up.
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const sendgrid = createSendgridProvider({
  apiKey: "SG.test",
  baseUrl: sandbox.url,
  from: "n@example.com",
  timeoutMs: 3000,
});
// When each call to the provider starts: what the deadline bounds.
const starts: number[] = [];
const [gate, watchedGate] = [
  ...h.gates([sendgrid]),
  ...h.gates([{ ...sendgrid, send: (message) => (starts.push(Date.now()), sendgrid.send(message)) }]),
];
if (!gate || !watchedGate) throw new Error("no gate");
// Retries are cheap here, so that only the deadline ends them.
const deps = h.deps(gate, { maxAttempts: 20 });
const watched = h.deps(watchedGate, { maxAttempts: 20 });
const { database, guard } = h;

const sentTo = (id: string) => sandbox.messages().filter((m) => m.custom_args.notification_id === id).length;
const guardOf = async (id: string) => (await guard.get(`${id}.email`))?.json<GuardValue>();
const due = (ms: number) => new Date(Date.now() + ms).toISOString();

/** Delivers as the consumer would: again after each nak's delay, until the item is acked. */
async function deliverUntilAcked(item: WorkItem, using = deps): Promise<Disposition[]> {
  const seen: Disposition[] = [];
  for (let i = 0; i < 50; i++) {
    const disposition = await deliver(using, item);
    seen.push(disposition);
    if (!("retryInMs" in disposition)) return seen;
    await sleep(disposition.retryInMs);
  }
  throw new Error("never acked");
}

t.test("an item whose deadline has passed is expired, never sent, and stays so when redelivered", async (t) => {
  const item = { ...(await workItem(database)), deliver_by: due(-1000) };
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "expired", reason: /^deadline_passed/ });
  t.match(await guardOf(item.notification_id), { state: "expired" }, "the guard says so, for any duplicate");
  t.same(await deliver(deps, item), { ack: true }, "a redelivery is acked");
  t.equal(sentTo(item.notification_id), 0, "nothing was sent");
  t.same(
    (await statusHistory(database, item)).map((e) => e.status),
    ["expired"],
  );
});

t.test("an item with time left is sent as usual", async (t) => {
  const item = { ...(await workItem(database)), deliver_by: due(60_000) };
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered" });
  t.equal(sentTo(item.notification_id), 1);
});

t.test("a deadline that passes while the provider is slow and failing: no call starts after it", async (t) => {
  // Every call is held 700 ms and refused (503) until a little past the deadline.
  const deadline = Date.now() + 1500;
  sandbox.fault({ status: 503, delay_ms: 700, for_ms: 1800 });
  t.teardown(() => sandbox.reset());
  const item = { ...(await workItem(database)), deliver_by: new Date(deadline).toISOString() };
  starts.length = 0;
  const dispositions = await deliverUntilAcked(item, watched);
  t.ok(dispositions.length >= 2, "retried while there was time");
  t.ok(starts.length >= 2, "the provider was called more than once");
  t.ok(
    starts.every((at) => at < deadline),
    `every call started before the deadline (${starts.map((at) => at - deadline).join(", ")} ms from it)`,
  );
  const row = await channelRow(database, item);
  t.match(row, { status: "expired" });
  t.match(row?.reason, /^deadline_(passed|before_next_attempt)/);
  t.equal(sentTo(item.notification_id), 0, "nothing was sent");
  const attempts = await database.sql<{ outcome: string; provider: string | null }[]>`
    select outcome, provider from delivery_attempts where notification_id = ${item.notification_id} order by attempt`;
  t.ok(attempts.length >= 1, "the failed attempts are recorded");
  t.ok(
    attempts.every((a) => a.outcome === "transient" && a.provider === "sendgrid"),
    "each with its provider and outcome",
  );
  t.match(await guardOf(item.notification_id), { state: "expired" });
});

t.test("past the deadline, a send the guard says was made is still recorded delivered", async (t) => {
  const item = { ...(await workItem(database)), deliver_by: due(-1000) };
  const sent: GuardValue = { state: "sent", at: Date.now(), attempt: 1, provider_id: "pid-1", worker: "other:1" };
  await guard.create(`${item.notification_id}.email`, new TextEncoder().encode(JSON.stringify(sent)));
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered", provider_id: "pid-1" });
});

t.test("past the deadline, addresses that accepted in time make the channel delivered, not expired", async (t) => {
  const item = { ...(await workItem(database)), deliver_by: due(-1000) };
  // An earlier attempt: one of the user's addresses accepted, another was refused for now.
  const partly: GuardValue = {
    state: "failed",
    at: Date.now(),
    attempt: 1,
    worker: "other:1",
    accepted: [{ key: "device-a", provider_id: "pid-a" }],
  };
  await guard.create(`${item.notification_id}.email`, new TextEncoder().encode(JSON.stringify(partly)));
  await database.sql`update notification_channels set status = 'retrying', attempts = 1
    where notification_id = ${item.notification_id}`;
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), {
    status: "delivered",
    provider_id: "pid-a",
    reason: /accepted before the deliver-by deadline/,
  });
  t.match(await guardOf(item.notification_id), { state: "sent", provider_id: "pid-a" });
  t.equal(sentTo(item.notification_id), 0, "nothing more was sent");
});
