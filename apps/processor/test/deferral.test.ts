import { eventually } from "@notify/testing";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { releaseDue } from "../src/deferral/release.js";
import { startScheduler } from "../src/deferral/scheduler.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// Deferral: a promotional notification inside quiet hours waits in Postgres (channel status
// deferred + a row in deferred_notifications) and the scheduler releases it once the window
// has ended, re-checking the policy; nothing of it lives in process memory.
const { database, bus, clock, deps } = await processorFixture(t);
const night = new Date("2026-06-01T22:30:00Z"); // 23:30 BST
const morning = new Date("2026-06-02T06:00:00Z"); // 07:00 BST, the window's end
const quiet = { start: "22:00", end: "07:00", tz: "Europe/London" };
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);

async function deferOne(userId: string, over: Parameters<typeof storeNotifications>[2][number] = { user_id: userId }) {
  const lane = await laneDeps(deps, "promotional");
  clock.now = night;
  const [message] = await storeNotifications(database, bus, [over]);
  if (!message) throw new Error("not stored");
  await routeNotification(lane, message);
  return message;
}

t.test("deferred until the window's end, then released; survives a restart in between", async (t) => {
  await seedUser(database, "def-1", { quiet_hours: quiet, rate_cap_per_day: 3 });
  const message = await deferOne("def-1", { user_id: "def-1", channels: ["email", "push"] });
  t.same((await channelRows(database, message.notification_id)).email, {
    status: "deferred",
    reason: "quiet_hours",
    at: morning,
  });

  // The processor that deferred it is gone; a new one (new pools, caches) takes over.
  const restarted = await laneDeps(deps, "promotional");
  clock.now = new Date(morning.getTime() - 1000);
  t.same(await releaseDue(restarted), { settled: 0, published: 0, redeferred: 0 }, "not before its time");
  clock.now = morning;
  t.same(await releaseDue(restarted), { settled: 1, published: 2, redeferred: 0 });
  const items = await itemsOf(message.notification_id);
  t.same(items.map((i) => i.subject).sort(), [
    bus.subjects.work("email", "promotional"),
    bus.subjects.work("push", "promotional"),
  ]);
  t.match(items.find((i) => i.item.channel === "email")?.item, { to: "def-1@example.com", subject: "Hi Ada" });
  t.same(
    (await channelRows(database, message.notification_id)).email,
    { status: "deferred", reason: "quiet_hours", at: morning },
    "status moves on when the worker sends (forward only), the planned time stays",
  );
  t.equal((await database.sql`select count(*)::int as n from deferred_notifications`)[0]?.n, 0);
  t.equal(
    (await database.sql`select count from promotional_daily_counts where user_id = 'def-1'`)[0]?.count,
    1,
    "counted on release",
  );
  t.same(await releaseDue(restarted), { settled: 0, published: 0, redeferred: 0 }, "released once");
});

t.test("the policy runs again at release: opt-outs, the cap and a new quiet window apply", async (t) => {
  await seedUser(database, "def-opt", { quiet_hours: quiet });
  await seedUser(database, "def-cap", { quiet_hours: quiet, rate_cap_per_day: 1 });
  await seedUser(database, "def-again", { quiet_hours: quiet });
  const optedOut = await deferOne("def-opt");
  const capFirst = await deferOne("def-cap");
  const capSecond = await deferOne("def-cap");
  const again = await deferOne("def-again");
  await seedUser(database, "def-opt", { quiet_hours: quiet, channel_optout: ["email"] });
  await seedUser(database, "def-again", { quiet_hours: { start: "22:00", end: "09:30", tz: "Europe/London" } });

  clock.now = morning;
  const lane = await laneDeps(deps, "promotional");
  t.same(await releaseDue(lane), { settled: 4, published: 1, redeferred: 1 });
  t.same((await channelRows(database, optedOut.notification_id)).email, {
    status: "suppressed",
    reason: "opted_out",
    at: null,
  });
  const capRows = [
    await channelRows(database, capFirst.notification_id),
    await channelRows(database, capSecond.notification_id),
  ];
  t.same(
    capRows.map((r) => r.email?.status),
    ["deferred", "suppressed"],
    "released in order: the first takes the day's one slot, the second is over the cap",
  );
  t.equal(capRows[1]?.email?.reason, "rate_cap");
  const later = new Date("2026-06-02T08:30:00Z"); // 09:30 BST
  t.same((await channelRows(database, again.notification_id)).email, {
    status: "deferred",
    reason: "quiet_hours",
    at: later,
  });
  clock.now = later;
  t.same(await releaseDue(lane), { settled: 1, published: 1, redeferred: 0 });
});

t.test("processors racing for due rows release each notification once (SKIP LOCKED)", async (t) => {
  const users = Array.from({ length: 30 }, (_, i) => `race-${i}`);
  for (const user of users) await seedUser(database, user, { quiet_hours: quiet });
  const messages = [];
  for (const user of users) messages.push(await deferOne(user), await deferOne(user));
  clock.now = morning;
  const lanes = await Promise.all([1, 2, 3, 4].map(() => laneDeps(deps, "promotional")));
  let published = 0;
  for (let round = 0; round < 10 && published < messages.length; round++) {
    const results = await Promise.all(lanes.map((lane) => releaseDue(lane, 7)));
    published += results.reduce((sum, r) => sum + r.published, 0);
  }
  t.equal(published, messages.length, "every deferred notification published exactly once in total");
  for (const m of messages) t.equal((await itemsOf(m.notification_id)).length, 1);
});

t.test("the scheduler releases due notifications on its own and stops cleanly", async (t) => {
  await seedUser(database, "sched-1", { quiet_hours: quiet });
  const message = await deferOne("sched-1");
  const scheduler = startScheduler(await laneDeps(deps, "promotional"), { intervalMs: 50 });
  t.teardown(() => scheduler.stop());
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal((await itemsOf(message.notification_id)).length, 0, "held while it is night");
  clock.now = morning;
  await eventually(
    async () => ((await itemsOf(message.notification_id)).length === 1 ? true : undefined),
    10_000,
    "release",
  );
  await scheduler.stop();
  t.pass("stopped");
});
