import type { LaneMessage, ThrottleSpec } from "@notify/core";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { releaseDue } from "../src/deferral/release.js";
import { purgeThrottleSlots } from "../src/deferral/scheduler.js";
import { joinDigestItem as joinItem } from "../src/digests/join.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, type NewNotification, processorFixture, seedUser, storeNotifications } from "./helpers.js";

// Per-user throttles: a slot per notification in throttle_slots, taken with its channel rows
// when something of it would be sent now, counted over a sliding period at the routing clock.
const { database, bus, clock, deps } = await processorFixture(t, { poolSize: 12 });
const lane = await laneDeps(deps, "promotional");
const comments: ThrottleSpec = { key: "comments", limit: 3, per: "1h" };
const noon = new Date("2026-06-01T12:00:00Z");

const one = async (n: NewNotification): Promise<LaneMessage> => {
  const [m] = await storeNotifications(database, bus, [n]);
  if (!m) throw new Error("not stored");
  return m;
};
const emailOf = async (m: LaneMessage) => (await channelRows(database, m.notification_id)).email;
const statuses = async (ids: string[]) =>
  database.sql<{ status: string; reason: string | null; n: number }[]>`
    select status, reason, count(*)::int as n from notification_channels where notification_id = any(${ids})
    group by status, reason order by status`;
const slots = (userId: string, key = "comments") =>
  database.sql<{ notification_id: string; taken_at: Date }[]>`
    select notification_id, taken_at from throttle_slots where user_id = ${userId} and key = ${key} order by taken_at`;

t.test("limit 3 per hour: three go, the fourth is throttled, and the period slides", async (t) => {
  await seedUser(database, "thr-1");
  clock.now = noon;
  const sent: LaneMessage[] = [];
  for (let i = 0; i < 4; i++) {
    const m = await one({ user_id: "thr-1", throttle: comments });
    t.equal(await routeNotification(lane, m), "routed");
    sent.push(m);
  }
  t.same(await Promise.all(sent.map(emailOf)), [
    { status: "pending", reason: null, at: null },
    { status: "pending", reason: null, at: null },
    { status: "pending", reason: null, at: null },
    { status: "suppressed", reason: "throttled", at: null },
  ]);
  const taken = await slots("thr-1");
  t.same(
    taken.map((s) => s.notification_id),
    sent.slice(0, 3).map((m) => m.notification_id),
    "a slot for each one sent, none for the throttled one",
  );
  t.same(
    taken.map((s) => s.taken_at),
    [noon, noon, noon],
    "at the routing clock",
  );

  clock.now = new Date(noon.getTime() + 3_600_000 - 1);
  const early = await one({ user_id: "thr-1", throttle: comments });
  await routeNotification(lane, early);
  t.match(await emailOf(early), { status: "suppressed", reason: "throttled" }, "still within the hour");
  clock.now = new Date(noon.getTime() + 3_600_000);
  const later = await one({ user_id: "thr-1", throttle: comments });
  await routeNotification(lane, later);
  t.match(await emailOf(later), { status: "pending" }, "an hour on, the noon slots have left the window");
  t.same((await slots("thr-1")).at(-1), { notification_id: later.notification_id, taken_at: clock.now });
});

t.test("a redelivered lane message takes no second slot and keeps its outcome", async (t) => {
  await seedUser(database, "thr-redeliver");
  clock.now = noon;
  const limitOne = { ...comments, limit: 1 };
  const first = await one({ user_id: "thr-redeliver", throttle: limitOne });
  const second = await one({ user_id: "thr-redeliver", throttle: limitOne });
  await routeNotification(lane, first);
  await routeNotification(lane, second);
  const restarted = await laneDeps(deps, "promotional");
  t.equal(await routeNotification(restarted, first), "duplicate");
  t.equal(await routeNotification(restarted, second), "duplicate");
  t.same(
    (await slots("thr-redeliver")).map((s) => s.notification_id),
    [first.notification_id],
  );
  t.match(await emailOf(first), { status: "pending" });
  t.match(await emailOf(second), { status: "suppressed", reason: "throttled" });
});

t.test("keys and users are independent", async (t) => {
  await seedUser(database, "thr-a");
  await seedUser(database, "thr-b");
  clock.now = noon;
  const limitOne = { ...comments, limit: 1 };
  const route = async (n: NewNotification) => {
    const m = await one(n);
    await routeNotification(lane, m);
    return (await emailOf(m))?.status;
  };
  t.equal(await route({ user_id: "thr-a", throttle: limitOne }), "pending");
  t.equal(await route({ user_id: "thr-a", throttle: limitOne }), "suppressed");
  t.equal(await route({ user_id: "thr-a", throttle: { ...limitOne, key: "likes" } }), "pending", "another key");
  t.equal(await route({ user_id: "thr-b", throttle: limitOne }), "pending", "another user");
  t.equal(await route({ user_id: "thr-a" }), "pending", "no throttle");
});

t.test("exact under concurrency: 20 routings at once on three processors, a limit of 5", async (t) => {
  await seedUser(database, "thr-busy");
  clock.now = noon;
  const lanes = await Promise.all([1, 2, 3].map(() => laneDeps(deps, "promotional")));
  const messages = await storeNotifications(
    database,
    bus,
    Array.from({ length: 20 }, () => ({ user_id: "thr-busy", throttle: { ...comments, limit: 5 } })),
  );
  await Promise.all(messages.map((m, i) => routeNotification(lanes[i % 3] as (typeof lanes)[number], m)));
  t.same(await statuses(messages.map((m) => m.notification_id)), [
    { status: "pending", reason: null, n: 5 },
    { status: "suppressed", reason: "throttled", n: 15 },
  ]);
  t.equal((await slots("thr-busy")).length, 5);
});

t.test("the throttle is taken before the cap, and a capped notification gives its slot back", async (t) => {
  await seedUser(database, "thr-cap", { rate_cap_per_day: 2 });
  clock.now = noon;
  const limitOne = { ...comments, limit: 1 };
  const a = await one({ user_id: "thr-cap", throttle: limitOne });
  const b = await one({ user_id: "thr-cap", throttle: limitOne });
  const c = await one({ user_id: "thr-cap" });
  for (const m of [a, b, c]) await routeNotification(lane, m);
  t.match(await emailOf(a), { status: "pending" });
  t.match(await emailOf(b), { status: "suppressed", reason: "throttled" });
  t.match(await emailOf(c), { status: "pending" }, "the throttled one spent none of the day's two");
  const count = async () =>
    (await database.sql`select count from promotional_daily_counts where user_id = 'thr-cap'`)[0]?.count;
  t.equal(await count(), 2);

  const d = await one({ user_id: "thr-cap", throttle: { ...comments, key: "digest-free" } });
  await routeNotification(lane, d);
  t.match(await emailOf(d), { status: "suppressed", reason: "rate_cap" });
  t.same(await slots("thr-cap", "digest-free"), [], "over the cap: not sent, so no slot is spent");
});

t.test("a notification deferred by quiet hours takes its slot when released", async (t) => {
  const quiet = { start: "22:00", end: "07:00", tz: "Europe/London" };
  const night = new Date("2026-06-01T22:30:00Z");
  const morning = new Date("2026-06-02T06:00:00Z");
  const daily: ThrottleSpec = { key: "digestless", limit: 1, per: "12h" };
  await seedUser(database, "thr-night", { quiet_hours: quiet });
  await seedUser(database, "thr-night-2", { quiet_hours: quiet });
  clock.now = night;
  const deferred = await one({ user_id: "thr-night", throttle: daily });
  const deferred2 = await one({ user_id: "thr-night-2", throttle: daily });
  await routeNotification(lane, deferred);
  await routeNotification(lane, deferred2);
  t.match(await emailOf(deferred), { status: "deferred", reason: "quiet_hours" });
  t.same(await slots("thr-night", "digestless"), [], "nothing sent yet, no slot");
  // Transactional traffic ignores quiet hours: it takes the one slot of the period.
  const urgent = await one({ user_id: "thr-night", priority: "transactional", throttle: daily });
  await routeNotification(await laneDeps(deps, "transactional"), urgent);
  t.match(await emailOf(urgent), { status: "pending" });

  clock.now = morning;
  t.same(await releaseDue(lane), { settled: 2, published: 1, redeferred: 0 });
  t.match(await emailOf(deferred), { status: "suppressed", reason: "throttled" }, "over the limit at release");
  t.same(
    await slots("thr-night-2", "digestless"),
    [{ notification_id: deferred2.notification_id, taken_at: morning }],
    "taken at release, at the release's time",
  );
  const after = await one({ user_id: "thr-night-2", throttle: daily });
  await routeNotification(lane, after);
  t.match(await emailOf(after), { status: "suppressed", reason: "throttled" });
});

t.test("a scheduled notification takes its slot at its send time", async (t) => {
  await seedUser(database, "thr-scheduled");
  clock.now = noon;
  const at = new Date(noon.getTime() + 30 * 60_000);
  const limitOne = { ...comments, limit: 1 };
  const scheduled = await one({ user_id: "thr-scheduled", send_at: at.toISOString(), throttle: limitOne });
  await routeNotification(lane, scheduled);
  t.match(await emailOf(scheduled), { status: "deferred", reason: "scheduled" });
  const now = await one({ user_id: "thr-scheduled", throttle: limitOne });
  await routeNotification(lane, now);
  t.match(await emailOf(now), { status: "pending" }, "the scheduled one holds no slot before its time");
  clock.now = at;
  await releaseDue(lane);
  t.match(await emailOf(scheduled), { status: "suppressed", reason: "throttled" });
  t.equal((await slots("thr-scheduled")).length, 1);
});

t.test('over the limit with over_limit "digest": it joins its digest, once', async (t) => {
  await seedUser(database, "thr-fold");
  clock.now = noon;
  const fold: NewNotification = {
    user_id: "thr-fold",
    throttle: { key: "comments", limit: 1, per: "1h", over_limit: "digest" },
    digest: { key: "comments", window: "30m", max_items: 50 },
  };
  const a = await one(fold);
  const b = await one(fold);
  await routeNotification(lane, a);
  await routeNotification(lane, b);
  await routeNotification(await laneDeps(deps, "promotional"), b);
  t.match(await emailOf(a), { status: "pending" }, "within the limit: sent alone");
  t.match(await emailOf(b), { status: "suppressed", reason: "throttled" });
  const items = await database.sql`select notification_id from digest_items where notification_id = any(${[
    a.notification_id,
    b.notification_id,
  ]})`;
  t.same(
    items.map((r) => r.notification_id),
    [b.notification_id],
    "the throttled one joined its digest, once",
  );
});

t.test(
  'released over the limit with over_limit "digest": it joins its digest before the release commits',
  async (t) => {
    const quiet = { start: "22:00", end: "07:00", tz: "Europe/London" };
    await seedUser(database, "thr-fold-night", { quiet_hours: quiet });
    clock.now = new Date("2026-06-01T22:30:00Z");
    const fold: NewNotification = {
      user_id: "thr-fold-night",
      throttle: { key: "comments", limit: 1, per: "12h", over_limit: "digest" },
      digest: { key: "comments", window: "30m", max_items: 50 },
    };
    const [a, b, c] = [await one(fold), await one(fold), await one({ ...fold, user_id: "thr-fold-night-2" })];
    await seedUser(database, "thr-fold-night-2", { quiet_hours: quiet });
    for (const m of [a, b, c]) await routeNotification(lane, m);
    t.match(await emailOf(b), { status: "deferred" });
    // c joined its digest in a release that then failed to commit: it is found there, not sent.
    await joinItem({ database, now: () => clock.now, log: deps.log }, c);
    clock.now = new Date("2026-06-02T06:00:00Z");
    await releaseDue(lane);
    t.match(await emailOf(a), { status: "deferred" }, "within the limit: released to be sent");
    t.match(await emailOf(b), { status: "suppressed", reason: "throttled" });
    t.match(await emailOf(c), { status: "suppressed", reason: "throttled" });
    t.same(
      (await slots("thr-fold-night")).map((s) => s.notification_id),
      [a.notification_id],
    );
    t.same(await slots("thr-fold-night-2"), [], "it took no slot");
    const joined = await database.sql<{ notification_id: string }[]>`
    select notification_id from digest_items where notification_id = any(${[a.notification_id, b.notification_id, c.notification_id]})
    order by notification_id`;
    t.same(
      joined.map((r) => r.notification_id),
      [b.notification_id, c.notification_id].sort(),
    );
  },
);

t.test("slots older than the longest period are purged", async (t) => {
  const day = 86_400_000;
  clock.now = new Date("2026-08-01T00:00:00Z");
  const at = (daysAgo: number) => new Date(clock.now.getTime() - daysAgo * day);
  await database.sql`
    insert into throttle_slots (client_id, user_id, key, notification_id, taken_at)
    values ('shop', 'thr-purge', 'k', 'old', ${at(32)}), ('shop', 'thr-purge', 'k', 'recent', ${at(30)})`;
  t.ok((await purgeThrottleSlots({ database, now: () => clock.now })) >= 1);
  t.same(
    (await slots("thr-purge", "k")).map((s) => s.notification_id),
    ["recent"],
    "a slot a 30-day window may still count stays",
  );
});
