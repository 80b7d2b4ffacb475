import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { purgeCapCounts } from "../src/deferral/scheduler.js";
import { routeNotification } from "../src/routing/route.js";
import { processorFixture, seedUser, storeNotifications } from "./helpers.js";

// The promotional daily cap: one conditional upsert per routed notification, so it is exact
// when many routings of one user run at once, and it is kept in Postgres across restarts.
const { database, bus, clock, deps } = await processorFixture(t, { poolSize: 12 });
const statuses = async (ids: string[]) =>
  database.sql<{ status: string; reason: string | null; n: number }[]>`
    select status, reason, count(*)::int as n from notification_channels where notification_id = any(${ids})
    group by status, reason order by status`;
const counter = async (userId: string, day: string) =>
  (await database.sql`select count from promotional_daily_counts where user_id = ${userId} and day = ${day}`)[0]?.count;

t.test("exact under concurrency: 60 routings at once, a cap of 7, exactly 7 sent", async (t) => {
  await seedUser(database, "cap-1", { rate_cap_per_day: 7 });
  // Three processors' worth of lanes, each with its own pool and renderer, all at once.
  const lanes = await Promise.all([1, 2, 3].map(() => laneDeps(deps, "promotional")));
  const messages = await storeNotifications(
    database,
    bus,
    Array.from({ length: 60 }, () => ({ user_id: "cap-1" })),
  );
  await Promise.all(messages.map((m, i) => routeNotification(lanes[i % 3] as (typeof lanes)[number], m)));
  t.same(await statuses(messages.map((m) => m.notification_id)), [
    { status: "pending", reason: null, n: 7 },
    { status: "suppressed", reason: "rate_cap", n: 53 },
  ]);
  t.equal(await counter("cap-1", "2026-06-01"), 7);
});

t.test("the day is the user's: it turns at local midnight, not UTC's", async (t) => {
  const lane = await laneDeps(deps, "promotional");
  await seedUser(database, "cap-tokyo", {
    rate_cap_per_day: 1,
    quiet_hours: { start: "03:00", end: "04:00", tz: "Asia/Tokyo" },
  });
  const send = async () => {
    const [m] = await storeNotifications(database, bus, [{ user_id: "cap-tokyo" }]);
    if (!m) throw new Error("not stored");
    await routeNotification(lane, m);
    return (
      await database.sql`select status, reason from notification_channels where notification_id = ${m.notification_id}`
    )[0];
  };
  clock.now = new Date("2026-06-01T14:30:00Z"); // 23:30 in Tokyo
  t.match(await send(), { status: "pending" });
  t.match(await send(), { status: "suppressed", reason: "rate_cap" });
  clock.now = new Date("2026-06-01T15:00:00Z"); // 00:00 in Tokyo, still June 1st in UTC
  t.match(await send(), { status: "pending" }, "a new local day");
  t.equal(await counter("cap-tokyo", "2026-06-01"), 1);
  t.equal(await counter("cap-tokyo", "2026-06-02"), 1);
});

t.test("the count survives a restart, counts promotional only, and old days are purged", async (t) => {
  await seedUser(database, "cap-restart", { rate_cap_per_day: 2 });
  clock.now = new Date("2026-06-01T12:00:00Z");
  const first = await laneDeps(deps, "promotional");
  const [a, b, c] = await storeNotifications(database, bus, [
    { user_id: "cap-restart" },
    { user_id: "cap-restart" },
    { user_id: "cap-restart" },
  ]);
  if (!a || !b || !c) throw new Error("not stored");
  await routeNotification(first, a);
  // A new process: new pools, renderer and caches; only Postgres remembers.
  const restarted = await laneDeps(deps, "promotional");
  await routeNotification(restarted, b);
  await routeNotification(restarted, c);
  t.same(await statuses([a.notification_id, b.notification_id, c.notification_id]), [
    { status: "pending", reason: null, n: 2 },
    { status: "suppressed", reason: "rate_cap", n: 1 },
  ]);
  const transactional = await laneDeps(deps, "transactional");
  const [tx] = await storeNotifications(database, bus, [{ user_id: "cap-restart", priority: "transactional" }]);
  if (!tx) throw new Error("not stored");
  await routeNotification(transactional, tx);
  t.same(await statuses([tx.notification_id]), [{ status: "pending", reason: null, n: 1 }], "transactional: no cap");
  t.equal(await counter("cap-restart", "2026-06-01"), 2);

  const [optedOut] = await storeNotifications(database, bus, [{ user_id: "cap-none", channels: null }]);
  if (!optedOut) throw new Error("not stored");
  await seedUser(database, "cap-none", { rate_cap_per_day: 1, category_optout: ["news"] });
  await routeNotification(restarted, optedOut);
  t.equal(await counter("cap-none", "2026-06-01"), undefined, "nothing sent, nothing counted");

  clock.now = new Date("2026-06-04T00:30:00Z");
  t.ok((await purgeCapCounts({ database, now: () => clock.now })) >= 1);
  t.equal(await counter("cap-restart", "2026-06-01"), undefined, "days over everywhere are purged");
});
