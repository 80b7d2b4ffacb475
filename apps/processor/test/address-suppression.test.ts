import type { Channel, FallbackStep, Priority } from "@notify/core";
import { moveStatus, readNotificationTimeline, readStatusEvents } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { releaseDue } from "../src/deferral/release.js";
import { runFallbacks } from "../src/fallback/job.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// Routing against the suppression list, on a real Postgres and NATS namespace: an address with
// an entry that holds for the notification's client (its own, or one for every client) is never
// queued; the channel is suppressed with reason address_suppressed, its routing decision names
// the entry, and a fallback chain moves on past it as past any suppressed channel.
const { database, bus, clock, deps } = await processorFixture(t);
const start = new Date("2026-06-01T12:00:00Z");
t.beforeEach(() => {
  clock.now = start;
});
const itemsOf = async (id: string) =>
  (await workItems(bus)).filter((w) => w.item.notification_id === id).map((w) => w.item.channel);

/** An entry of the list, written as the receipts and the API write them. */
async function suppress(channel: "email" | "sms", address: string, clientId: string, reason = "hard_bounce") {
  const [row] = await database.sql<{ created_at: Date }[]>`
    insert into suppressions (channel, address, client_id, reason, source)
    values (${channel}, ${address}, ${clientId}, ${reason}, '{}') returning created_at`;
  return (row as { created_at: Date }).created_at.toISOString();
}

/** Stores and routes a notification of client "shop" (the helpers' client) on `channels`. */
async function route(
  userId: string,
  channels: Channel[],
  steps?: FallbackStep[],
  category = "account",
  priority: Priority = "transactional",
) {
  const [message] = await storeNotifications(database, bus, [{ user_id: userId, channels, priority, category }]);
  if (!message) throw new Error("not stored");
  if (steps)
    await database.sql`insert into notification_fallbacks (notification_id, steps, watching)
      values (${message.notification_id}, ${database.sql.json(steps as never)}, ${channels[0] as Channel})`;
  await routeNotification(await laneDeps(deps, priority), message);
  return message.notification_id;
}

const routed = async (id: string, channel: Channel) =>
  (await readNotificationTimeline(database, id)).find((e) => e.event === "routed" && e.channel === channel);

t.test("an address suppressed for every client: not queued, and the decision names the entry", async (t) => {
  await seedUser(database, "as-1");
  const since = await suppress("email", "as-1@example.com", "");
  const id = await route("as-1", ["email", "in_app"]);
  const rows = await channelRows(database, id);
  t.same(rows.email, { status: "suppressed", reason: "address_suppressed", at: null });
  t.match(rows.in_app, { status: "pending" }, "the other channel goes");
  t.same(await itemsOf(id), ["in_app"], "no work item for the suppressed address");
  t.match(await routed(id, "email"), {
    status: "suppressed",
    reason: `address_suppressed: hard_bounce, every client, since ${since}`,
  });
});

t.test("a critical category is not sent to a suppressed address either", async (t) => {
  await seedUser(database, "as-crit");
  await suppress("sms", "+15550001111", "", "carrier_opt_out");
  const id = await route("as-crit", ["sms"], undefined, "security");
  t.same((await channelRows(database, id)).sms, { status: "suppressed", reason: "address_suppressed", at: null });
  t.same(await itemsOf(id), []);
  await database.sql`delete from suppressions where channel = 'sms'`;
});

t.test("a client's own entry suppresses its notifications; another client's does not", async (t) => {
  await seedUser(database, "as-2");
  await seedUser(database, "as-3");
  const since = await suppress("email", "as-2@example.com", "shop", "unsubscribe");
  await suppress("email", "as-3@example.com", "other-client", "manual");
  const mine = await route("as-2", ["email"]);
  const theirs = await route("as-3", ["email"]);
  t.same((await channelRows(database, mine)).email, { status: "suppressed", reason: "address_suppressed", at: null });
  t.match(await routed(mine, "email"), { reason: `address_suppressed: unsubscribe, this client, since ${since}` });
  t.same((await channelRows(database, theirs)).email, { status: "pending", reason: null, at: null });
  t.same(await itemsOf(theirs), ["email"], "another client's entry holds for that client only");
});

t.test("contacts are matched in the list's form: an email in any case, a phone number as written", async (t) => {
  await database.sql`insert into user_contacts (user_id, email, phone) values ('as-4', '  As-4@Example.COM ', '+1 (555) 000-4444')`;
  await suppress("email", "as-4@example.com", "");
  await suppress("sms", "+15550004444", "");
  const id = await route("as-4", ["email", "sms"]);
  const rows = await channelRows(database, id);
  t.match(rows, { email: { reason: "address_suppressed" }, sms: { reason: "address_suppressed" } });
  t.same(await itemsOf(id), []);
});

t.test("a fallback chain moves on past a suppressed address and sends the next channel", async (t) => {
  await seedUser(database, "as-5");
  await suppress("email", "as-5@example.com", "");
  const id = await route("as-5", ["email"], [{ channel: "sms", when: ["suppressed"] }]);
  t.match((await channelRows(database, id)).email, { status: "suppressed", reason: "address_suppressed" });
  t.match(await runFallbacks(await laneDeps(deps, "transactional")), { taken: 1 });
  t.same((await channelRows(database, id)).sms, { status: "pending", reason: null, at: null });
  t.same(await itemsOf(id), ["sms"], "sms is sent instead");
});

t.test("a fallback step to a suppressed address is suppressed too, with the entry in its history", async (t) => {
  await seedUser(database, "as-6");
  const since = await suppress("sms", "+15550001111", "shop", "manual");
  const id = await route("as-6", ["push"], [{ channel: "sms", when: ["failed"] }]);
  await moveStatus(database.sql, { notification_id: id, channel: "push" }, "failed", { reason: "webpush 410" });
  await runFallbacks(await laneDeps(deps, "transactional"));
  t.same((await channelRows(database, id)).sms, { status: "suppressed", reason: "address_suppressed", at: null });
  const detail = `address_suppressed: manual, this client, since ${since}`;
  t.match(await routed(id, "sms"), { reason: detail });
  t.match(await readStatusEvents(database, id, "sms"), [{ status: "suppressed", reason: detail }]);
  t.same(await itemsOf(id), ["push"]);
  await database.sql`delete from suppressions where channel = 'sms'`;
});

t.test("a deferred channel whose address is suppressed meanwhile is not released to be sent", async (t) => {
  await seedUser(database, "as-7", { quiet_hours: { start: "11:00", end: "13:00", tz: "UTC" } });
  const id = await route("as-7", ["email"], undefined, "news", "promotional");
  t.match((await channelRows(database, id)).email, { status: "deferred" });
  const since = await suppress("email", "as-7@example.com", "", "spam_complaint");
  clock.now = new Date("2026-06-01T13:00:01Z");
  t.match(await releaseDue(await laneDeps(deps, "promotional")), { settled: 1, published: 0 });
  t.match((await channelRows(database, id)).email, { status: "suppressed", reason: "address_suppressed" });
  t.match(await readStatusEvents(database, id, "email"), [
    { status: "suppressed", reason: `address_suppressed: spam_complaint, every client, since ${since}` },
  ]);
  t.same(await itemsOf(id), []);
});
