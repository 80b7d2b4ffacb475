import { setTimeout as sleep } from "node:timers/promises";
import type { Disposition } from "@notify/bus";
import type { GuardValue, WorkItem } from "@notify/core";
import { startSendgridSandbox, startSmtpSandbox } from "@notify/devstack";
import { createSendgridProvider, createSmtpProvider } from "@notify/providers";
import t from "tap";
import { chooseGate } from "../src/delivery/choose.js";
import { deliver } from "../src/delivery/deliver.js";
import { channelRow, deadLetters, harness, workItem } from "./helpers.js";

// Email failover, against a real database, NATS, the SendGrid sandbox and the SMTP sandbox
// (nodemailer over the real SMTP protocol): when SendGrid cannot take an email, SMTP carries
// it, and the send guard still lets only one provider send it.
const h = await harness(t);
const sendgrid = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
const smtp = await startSmtpSandbox({ user: "notify", password: "relay-secret" });
t.teardown(() => Promise.all([sendgrid.close(), smtp.close()]));
const smtpProvider = createSmtpProvider({
  url: smtp.smtpUrl,
  from: "n@example.com",
  timeoutMs: 3000,
  requireTls: false,
});
t.teardown(() => smtpProvider.close?.());
const [primary] = h.gates([
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sendgrid.url, from: "n@example.com", timeoutMs: 1500 }),
]);
const [secondary] = h.gates([smtpProvider]);
if (!primary || !secondary) throw new Error("no gates");
const deps = h.deps(primary, { failover: [secondary], failoverAfterAttempts: 2, maxAttempts: 5 });
const { database, guard, bus } = h;

const viaSendgrid = (id: string) => sendgrid.messages().filter((m) => m.custom_args.notification_id === id).length;
const viaSmtp = (id: string) => smtp.messages().filter((m) => m.notification_id === id).length;
const guardOf = async (id: string) => (await guard.get(`${id}.email`))?.json<GuardValue>();
const attempts = (id: string) =>
  database.sql<{ attempt: number; provider: string; outcome: string }[]>`
    select attempt, provider, outcome from delivery_attempts where notification_id = ${id} order by attempt`;

/** Delivers as the consumer would: again after each nak's delay, until the item is acked. */
async function deliverUntilAcked(item: WorkItem): Promise<Disposition[]> {
  const seen: Disposition[] = [];
  for (let i = 0; i < 50; i++) {
    const disposition = await deliver(deps, item);
    seen.push(disposition);
    if (!("retryInMs" in disposition)) return seen;
    await sleep(disposition.retryInMs);
  }
  throw new Error("never acked");
}

t.afterEach(() => {
  sendgrid.reset();
  smtp.reset();
});

t.test("SendGrid healthy: SMTP is never used", async (t) => {
  const item = await workItem(database);
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered", provider: "sendgrid" });
  t.equal(viaSendgrid(item.notification_id), 1);
  t.equal(viaSmtp(item.notification_id), 0);
});

t.test("SendGrid healthy, many sends at once: SMTP is never used while SendGrid has tokens", async (t) => {
  // Each send asks the shared bucket for its token; sends asking while another's request is in
  // flight wait for it, which is not a spent rate: they must not spill to the failover.
  const items = await Promise.all(Array.from({ length: 40 }, () => workItem(database)));
  const outcomes = await Promise.all(items.map((item) => deliver(deps, item)));
  t.ok(
    outcomes.every((o) => "ack" in o),
    "all sent",
  );
  const viaSmtpNow = items.filter((item) => viaSmtp(item.notification_id) > 0).length;
  t.equal(viaSmtpNow, 0, "none through SMTP");
  t.equal(items.filter((item) => viaSendgrid(item.notification_id) === 1).length, 40, "each once through SendGrid");
});

t.test("SendGrid's rate spent: sends at once spill to SMTP instead of waiting", async (t) => {
  // A token every five seconds: the bucket stays spent long after the first send took its one.
  const [slow] = h.gates(
    [createSendgridProvider({ apiKey: "SG.test", baseUrl: sendgrid.url, from: "n@example.com", timeoutMs: 1500 })],
    { defaultRate: { perSecond: 0.2, burst: 1 }, transactionalReservedPercent: 0 },
  );
  if (!slow) throw new Error("no gate");
  const spilling = h.deps(slow, { failover: [secondary], failoverAfterAttempts: 2, maxAttempts: 5 });
  const [first, next, ...items] = await Promise.all(Array.from({ length: 7 }, () => workItem(database)));
  if (!first || !next) throw new Error("no items");
  // One takes SendGrid's only token and the next waits there for another: the bucket is spent.
  t.same(await deliver(spilling, first), { ack: true });
  const waiting = deliver(spilling, next);
  for (let i = 0; i < 300 && !slow.limiter.spent(next.priority); i++) await sleep(10);
  t.ok(slow.limiter.spent(next.priority), "SendGrid's bucket answered: no token for now");
  const choice = chooseGate(spilling, next.priority, 0, false);
  t.equal(choice.action === "use" ? choice.gate : null, secondary, "so the next send goes to SMTP");
  await Promise.all(items.map((item) => deliver(spilling, item)));
  t.equal(items.filter((item) => viaSmtp(item.notification_id) === 1).length, 5, "the five went through SMTP");
  await waiting;
  t.equal(viaSendgrid(next.notification_id), 1, "the one waiting at SendGrid went there once its token came");
});

t.test("SendGrid refusing past its retries: SMTP carries the email, once", async (t) => {
  sendgrid.fault({ status: 503 });
  const item = await workItem(database);
  await deliverUntilAcked(item);
  const row = await channelRow(database, item);
  t.match(row, { status: "delivered", provider: "smtp", attempts: 3 }, "the status names the provider that sent");
  t.equal(viaSmtp(item.notification_id), 1, "SMTP has it once");
  t.equal(viaSendgrid(item.notification_id), 0, "SendGrid accepted nothing");
  t.match(await attempts(item.notification_id), [
    { attempt: 1, provider: "sendgrid", outcome: "transient" },
    { attempt: 2, provider: "sendgrid", outcome: "transient" },
    { attempt: 3, provider: "smtp", outcome: "accepted" },
  ]);
  const mail = smtp.messages().find((m) => m.notification_id === item.notification_id);
  t.equal(row?.provider_id, mail?.message_id, "the provider id is the mail's Message-ID");
  t.match(await guardOf(item.notification_id), { state: "sent", provider: "smtp" });
  t.same(await deliver(deps, item), { ack: true }, "a redelivery is acked");
  t.equal(viaSmtp(item.notification_id) + viaSendgrid(item.notification_id), 1, "and sends nothing more");
});

t.test("SendGrid's breaker open: the first attempt goes to SMTP at once", async (t) => {
  const [tripped] = h.gates(
    [createSendgridProvider({ apiKey: "SG.test", baseUrl: sendgrid.url, from: "n@example.com", timeoutMs: 1500 })],
    {
      breaker: {
        windowCalls: 4,
        minCalls: 2,
        failurePercent: 50,
        slowCallMs: 60_000,
        openMs: 60_000,
        halfOpenProbes: 1,
      },
    },
  );
  if (!tripped) throw new Error("no gate");
  sendgrid.fault({ status: 500, times: 2 });
  const opening = h.deps(tripped, { failover: [secondary], failoverAfterAttempts: 2, maxAttempts: 5 });
  for (let i = 0; i < 2; i++) await deliver(opening, await workItem(database));
  t.equal(tripped.breaker.state(), "open", "two failures opened SendGrid's breaker");
  const item = await workItem(database);
  t.same(await deliver(opening, item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered", provider: "smtp", attempts: 1 });
  t.equal(viaSmtp(item.notification_id), 1);
});

t.test("an unknown outcome at SendGrid is never sent again through SMTP", async (t) => {
  // Held past the provider's deadline: SendGrid may have queued it.
  sendgrid.fault({ delay_ms: 2500, times: 1 });
  const item = await workItem(database);
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "unsettled" });
  t.equal(viaSmtp(item.notification_id), 0, "SMTP was not asked");
  t.same(await deliver(deps, item), { ack: true });
  t.equal(viaSmtp(item.notification_id), 0, "nor on a redelivery");
  const [letter] = await deadLetters(bus, item.notification_id);
  t.match(letter, { class: "outcome_unknown", provider: "sendgrid" });
});

t.test("both failing: retries are spent over both, then the email is dead-lettered", async (t) => {
  sendgrid.fault({ status: 503 });
  smtp.fault({ code: 451 });
  const item = await workItem(database);
  await deliverUntilAcked(item);
  t.match(await channelRow(database, item), { status: "failed", attempts: 5 });
  t.same(
    (await attempts(item.notification_id)).map((a) => a.provider),
    ["sendgrid", "sendgrid", "smtp", "smtp", "smtp"],
  );
});
