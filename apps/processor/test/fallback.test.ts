import type { FallbackStep } from "@notify/core";
import { moveStatus } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { runFallbacks } from "../src/fallback/job.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// Channel fallback against a real Postgres and NATS namespace: the next channel is routed when
// the watched one fails, is suppressed or goes unconfirmed, exactly once, whatever runs twice or
// crashes in between; the chain's state lives in Postgres only.
const { database, bus, clock, deps } = await processorFixture(t);
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);
const start = new Date("2026-06-01T12:00:00Z");
t.beforeEach(() => {
  clock.now = start;
});

/** Stores and routes a notification on `first`, with its chain, as ingest and the lane consumer would. */
async function send(userId: string, first: "push" | "email" | "sms", steps: FallbackStep[]) {
  const [message] = await storeNotifications(database, bus, [
    { user_id: userId, channels: [first], priority: "transactional", category: "account" },
  ]);
  if (!message) throw new Error("not stored");
  await database.sql`insert into notification_fallbacks (notification_id, steps, watching)
    values (${message.notification_id}, ${database.sql.json(steps as never)}, ${first})`;
  await routeNotification(await laneDeps(deps, "transactional"), message);
  return message.notification_id;
}
const ref = (id: string, channel: "push" | "email" | "sms") => ({ notification_id: id, channel });
const chain = async (id: string) =>
  (
    await database.sql<
      { next_step: number; watching: string; done_at: Date | null; confirm_by: Date | null; taken: unknown[] }[]
    >`
      select next_step, watching, done_at, confirm_by, taken from notification_fallbacks where notification_id = ${id}`
  )[0];

t.test("the watched channel failed: the next one is routed and queued once, even when rounds repeat", async (t) => {
  await seedUser(database, "fb-1");
  const id = await send("fb-1", "push", [{ channel: "sms", when: ["failed"] }]);
  const lane = await laneDeps(deps, "transactional");
  t.match(await runFallbacks(lane), { taken: 0 }, "nothing while push has no outcome");
  await moveStatus(database.sql, ref(id, "push"), "failed", { reason: "webpush 410" });
  const rounds = await Promise.all([runFallbacks(lane), runFallbacks(await laneDeps(deps, "transactional"))]);
  t.equal(
    rounds.reduce((n, r) => n + r.taken, 0),
    1,
    "two processors at once take it once",
  );
  t.same((await channelRows(database, id)).sms, { status: "pending", reason: null, at: null });
  const items = await itemsOf(id);
  t.same(
    items.map((i) => i.item.channel),
    ["push", "sms"],
    "one work item for sms",
  );
  t.match(items[1]?.item, { to: "+15550001111", body: "Deal for Ada" });
  t.match(await chain(id), { next_step: 1, watching: "sms", taken: [{ from: "push", to: "sms", because: "failed" }] });
  t.ok((await chain(id))?.done_at, "the chain ends after its last step");
  t.match(await runFallbacks(lane), { taken: 0 }, "a later round does nothing");
});

t.test("suppressed by preferences: the step taken only when it names the condition", async (t) => {
  await seedUser(database, "fb-2", { channel_optout: ["push"] });
  const taken = await send("fb-2", "push", [{ channel: "email", when: ["suppressed"] }]);
  const stopped = await send("fb-2", "push", [{ channel: "email", when: ["failed"] }]);
  await runFallbacks(await laneDeps(deps, "transactional"));
  t.match((await channelRows(database, taken)).email, { status: "pending" });
  t.equal((await channelRows(database, stopped)).email, undefined, "not for a step that waits for a failure");
  t.ok((await chain(stopped))?.done_at, "that chain ended");
});

t.test("the next channel is routed as any: the user's opt-out of it is recorded, the chain goes on", async (t) => {
  await seedUser(database, "fb-3", { channel_optout: ["sms"] });
  const id = await send("fb-3", "push", [
    { channel: "sms", when: ["failed"] },
    { channel: "email", when: ["suppressed"] },
  ]);
  await moveStatus(database.sql, ref(id, "push"), "failed", { reason: "webpush 410" });
  const lane = await laneDeps(deps, "transactional");
  await runFallbacks(lane);
  t.same((await channelRows(database, id)).sms, { status: "suppressed", reason: "opted_out", at: null });
  await runFallbacks(lane);
  t.match((await channelRows(database, id)).email, { status: "pending" }, "then its own fallback");
  t.same(
    (await itemsOf(id)).map((i) => i.item.channel),
    ["push", "email"],
  );
});

t.test(
  "unconfirmed: sent but no receipt within the window, taken after a crash in the middle of the wait",
  async (t) => {
    await seedUser(database, "fb-4");
    const id = await send("fb-4", "email", [{ channel: "sms", when: ["unconfirmed"], confirm_within_seconds: 60 }]);
    await moveStatus(database.sql, ref(id, "email"), "delivered", {
      provider: "sendgrid",
      providerId: "sg-4",
      attempts: 1,
    });
    const before = await laneDeps(deps, "transactional");
    t.match(await runFallbacks(before), { waiting: 1, taken: 0 });
    t.same((await chain(id))?.confirm_by, new Date(start.getTime() + 60_000), "the wait is stored, not held in memory");

    // That processor is gone; two others take over once the window has passed.
    clock.now = new Date(start.getTime() + 30_000);
    t.match(await runFallbacks(await laneDeps(deps, "transactional")), { taken: 0 }, "not before its time");
    clock.now = new Date(start.getTime() + 61_000);
    const rounds = await Promise.all([
      runFallbacks(await laneDeps(deps, "transactional")),
      runFallbacks(await laneDeps(deps, "transactional")),
    ]);
    t.equal(
      rounds.reduce((n, r) => n + r.taken, 0),
      1,
      "taken exactly once",
    );
    t.same(
      (await itemsOf(id)).map((i) => i.item.channel),
      ["email", "sms"],
    );
  },
);

t.test("unconfirmed: a delivery receipt within the window ends the chain", async (t) => {
  await seedUser(database, "fb-5");
  const id = await send("fb-5", "email", [{ channel: "sms", when: ["unconfirmed"], confirm_within_seconds: 60 }]);
  await moveStatus(database.sql, ref(id, "email"), "delivered", {
    provider: "sendgrid",
    providerId: "sg-5",
    attempts: 1,
  });
  const lane = await laneDeps(deps, "transactional");
  await runFallbacks(lane);
  await database.sql`insert into provider_receipts (provider, event_id, provider_id, status, payload, applied_at)
    values ('sendgrid', 'ev-5', 'sg-5', 'delivered', '{}', now())`;
  clock.now = new Date(start.getTime() + 61_000);
  t.match(await runFallbacks(lane), { taken: 0, ended: 1 });
  t.equal((await channelRows(database, id)).sms, undefined);
});

t.test("a fallback due after the notification's deadline expires instead of being sent", async (t) => {
  await seedUser(database, "fb-6");
  const [message] = await storeNotifications(database, bus, [
    {
      user_id: "fb-6",
      channels: ["push"],
      priority: "transactional",
      deliver_by: new Date(start.getTime() + 10_000).toISOString(),
    },
  ]);
  if (!message) throw new Error("not stored");
  const id = message.notification_id;
  await database.sql`insert into notification_fallbacks (notification_id, steps, watching)
    values (${id}, ${database.sql.json([{ channel: "sms", when: ["failed"] }] as never)}, 'push')`;
  await routeNotification(await laneDeps(deps, "transactional"), message);
  await moveStatus(database.sql, ref(id, "push"), "failed", { reason: "webpush 410" });
  clock.now = new Date(start.getTime() + 20_000);
  await runFallbacks(await laneDeps(deps, "transactional"));
  t.same((await channelRows(database, id)).sms, { status: "expired", reason: "deadline_passed", at: null });
  t.same(
    (await itemsOf(id)).map((i) => i.item.channel),
    ["push"],
  );
});
