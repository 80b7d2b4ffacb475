import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run } from "@notify/cli";
import type { GuardValue, WorkItem } from "@notify/core";
import { resetChannelForReplay } from "@notify/db";
import { startPlivoSandbox, startSendgridSandbox } from "@notify/devstack";
import { createPlivoProvider, createSendgridProvider } from "@notify/providers";
import { eventually } from "@notify/testing";
import t, { type Test } from "tap";
import { startConsumers } from "../src/consumers.js";
import { deliver } from "../src/delivery/deliver.js";
import { channelRow, deadLetters, harness, statusHistory, workItem } from "./helpers.js";

// The workers check the suppression list before every send, whenever the channel was routed and
// however its item came back (a replayed dead letter): an address with an entry that holds for
// the notification's client (helpers' notifications are client "c") or for every client is never
// sent to; the channel ends suppressed (address_suppressed, the entry in its history), acked,
// not dead-lettered. A replay's plan skips a suppressed address already; the workers' check
// covers one suppressed after the plan. Real Postgres and NATS, and the SendGrid and Plivo sandboxes.
const h = await harness(t);
const journal = join(mkdtempSync(join(tmpdir(), "notify-suppression-")), "sendgrid.jsonl");
const sendgrid = await startSendgridSandbox({ port: 0, apiKey: "SG.test", journal });
const plivo = await startPlivoSandbox({ port: 0, authId: "MASANDBOX", authToken: "sandbox-token" });
t.teardown(() => Promise.all([sendgrid.close(), plivo.close()]));
const [email, sms] = h.gates([
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sendgrid.url, from: "n@example.com", timeoutMs: 2000 }),
  createPlivoProvider({
    authId: "MASANDBOX",
    authToken: "sandbox-token",
    baseUrl: plivo.url,
    from: "+14155550100",
    timeoutMs: 2000,
  }),
]);
if (!email || !sms) throw new Error("no gates");
const { database, guard } = h;

/** Mail for this notification the SendGrid sandbox accepted, as it answered and as it journaled. */
const mailsTo = (id: string) => ({
  answered: sendgrid.messages().filter((m) => m.custom_args.notification_id === id).length,
  // Written from the first accepted mail on.
  journaled: existsSync(journal)
    ? readFileSync(journal, "utf8")
        .split("\n")
        .filter((line) => line.includes(id)).length
    : 0,
});
const guardOf = async (item: WorkItem) =>
  (await guard.get(`${item.notification_id}.${item.channel}`))?.json<GuardValue>();

async function suppress(channel: "email" | "sms", address: string, clientId: string, reason = "hard_bounce") {
  const [row] = await database.sql<{ created_at: Date }[]>`
    insert into suppressions (channel, address, client_id, reason, source)
    values (${channel}, ${address}, ${clientId}, ${reason}, '{}') returning created_at`;
  return (row as { created_at: Date }).created_at.toISOString();
}

t.test("an address suppressed for every client is never sent to: suppressed, acked, in history", async (t) => {
  const item = await workItem(database, { to: "Ada.Everyone@Example.com" });
  const since = await suppress("email", "ada.everyone@example.com", "");
  t.same(await deliver(h.deps(email), item), { ack: true });
  t.match(await channelRow(database, item), { status: "suppressed", reason: "address_suppressed", attempts: 0 });
  t.same(mailsTo(item.notification_id), { answered: 0, journaled: 0 }, "nothing reached the provider");
  t.same(
    (await statusHistory(database, item)).map((e) => [e.status, e.reason]),
    [["suppressed", `address_suppressed: hard_bounce, every client, since ${since}`]],
  );
  t.match(await guardOf(item), { state: "suppressed" }, "the guard keeps any other worker from sending");
  t.same(await deadLetters(h.bus, item.notification_id), [], "not dead-lettered");
  t.same(await deliver(h.deps(email), item), { ack: true }, "a redelivery is acked");
  t.equal(mailsTo(item.notification_id).answered, 0);
});

t.test("the client's own entry suppresses; another client's entry does not", async (t) => {
  const mine = await workItem(database, { to: "own@example.com" });
  const theirs = await workItem(database, { to: "theirs@example.com" });
  const since = await suppress("email", "own@example.com", "c", "manual");
  await suppress("email", "theirs@example.com", "another-client", "manual");
  t.same(await deliver(h.deps(email), mine), { ack: true });
  t.same(await deliver(h.deps(email), theirs), { ack: true });
  t.match(await channelRow(database, mine), { status: "suppressed", reason: "address_suppressed" });
  t.match(await statusHistory(database, mine), [
    { status: "suppressed", reason: `address_suppressed: manual, this client, since ${since}` },
  ]);
  t.equal(mailsTo(mine.notification_id).answered, 0);
  t.match(await channelRow(database, theirs), { status: "delivered" });
  t.equal(mailsTo(theirs.notification_id).answered, 1, "another client's entry holds for that client only");
});

t.test("an SMS to a number suppressed after routing is never sent", async (t) => {
  const item = await workItem(database, { channel: "sms", to: "+1 (415) 555-0199" });
  await suppress("sms", "+14155550199", "", "carrier_opt_out");
  t.same(await deliver(h.deps(sms), item), { ack: true });
  t.match(await channelRow(database, item), { status: "suppressed", reason: "address_suppressed" });
  t.same(
    plivo.messages().filter((m) => m.dst.endsWith("4155550199")),
    [],
  );
});

t.test("a claim another worker holds is left to it: the send it may be making is not overwritten", async (t) => {
  const item = await workItem(database, { to: "held@example.com" });
  await suppress("email", "held@example.com", "");
  const held: GuardValue = { state: "sent", at: Date.now(), attempt: 1, worker: "other:2", provider: "sendgrid" };
  await guard.create(`${item.notification_id}.email`, new TextEncoder().encode(JSON.stringify(held)));
  t.same(await deliver(h.deps(email), item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered" }, "what the guard says was sent is recorded");
});

/** The consumers, as a worker process runs them: started by the first test that needs them. */
let consuming: Promise<unknown> | undefined;
const gates = [email, sms];
const consumers = () => {
  consuming ??= startConsumers({
    ...h.deps(email),
    databases: { transactional: database, promotional: database },
    gates,
    concurrency: { transactional: 2, promotional: 2 },
  }).then((delivery) => {
    t.teardown(() => delivery.stop());
    return delivery;
  });
  return consuming;
};

/** A dead letter for `userId`'s email, as a provider's refusal makes one. */
async function deadLettered(t: Test, userId: string, to: string) {
  await consumers();
  const item = await workItem(database, { userId, to });
  await database.sql`insert into user_contacts (user_id, email) values (${userId}, ${to})`;
  sendgrid.fault({ status: 400, match_to: to });
  await h.bus.publish(h.bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:email`);
  await eventually(async () => ((await channelRow(database, item))?.status === "failed" ? true : undefined));
  t.equal((await deadLetters(h.bus, item.notification_id)).length, 1, "dead-lettered");
  sendgrid.reset();
  return item;
}

t.test("a dead letter whose address was suppressed is not replayed: the plan names the entry", async (t) => {
  const item = await deadLettered(t, "grace", "grace@example.com");
  const since = await suppress("email", "grace@example.com", "", "spam_complaint");
  const skipped = `skipped: the address is on the suppression list (address_suppressed: spam_complaint, every client, since ${since})`;
  for (const more of [["--dry-run"], []]) {
    let stdout = "";
    let stderr = "";
    const io = { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } };
    const code = await run(["dlq", "replay", "--notification", item.notification_id, ...more, "--json"], io, {
      database,
      bus: async () => h.bus,
      criticalCategories: [],
    });
    t.equal(code, 0, stderr);
    t.match(
      JSON.parse(stdout),
      { data: [{ result: skipped }] },
      `${more[0] ?? "a run"}: what the workers would refuse`,
    );
  }
  t.match(await channelRow(database, item), { status: "failed" }, "the channel is left as it was");
  t.same(mailsTo(item.notification_id), { answered: 0, journaled: 0 }, "the sandbox received nothing");
  t.match(await statusHistory(database, item), [{ status: "failed", reason: /^sendgrid 400/ }]);
  t.equal((await deadLetters(h.bus, item.notification_id)).length, 1, "not dead-lettered again");
});

t.test("an address suppressed after a replay was planned is never sent to: it ends suppressed", async (t) => {
  const item = await deadLettered(t, "hopper", "hopper@example.com");
  // What a replay does once its plan found the address clear (libs/ops replay): the send guard
  // released, the channel reset and the item published again. The address was suppressed in between.
  await suppress("email", "hopper@example.com", "", "spam_complaint");
  const dead = await guardOf(item);
  const released: GuardValue = {
    ...(dead as GuardValue),
    state: "failed",
    at: Date.now(),
    reason: "released for a replay",
  };
  await guard.put(`${item.notification_id}.email`, new TextEncoder().encode(JSON.stringify(released)));
  const reset = await resetChannelForReplay(database, {
    notificationId: item.notification_id,
    channel: "email",
    from: ["failed"],
    reason: "replay",
  });
  t.ok(reset);
  await h.bus.publish(h.bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:email:replay:1`);
  const row = await eventually(async () => {
    const r = await channelRow(database, item);
    return r?.status === "suppressed" ? r : undefined;
  });
  t.match(row, { reason: "address_suppressed" });
  t.same(mailsTo(item.notification_id), { answered: 0, journaled: 0 }, "the sandbox received nothing");
  t.match(await statusHistory(database, item), [
    { status: "failed", reason: /^sendgrid 400/ },
    { status: "pending", reason: "replay" },
    { status: "suppressed", reason: /^address_suppressed: spam_complaint, every client, since / },
  ]);
  t.equal((await deadLetters(h.bus, item.notification_id)).length, 1, "not dead-lettered again");
});
