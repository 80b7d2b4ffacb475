import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { releaseDue } from "../src/deferral/release.js";
import { reconcile } from "../src/reconciler/reconciler.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// Scheduled sends: a notification with a send time still to come is routed at once into the
// deferral machinery (every channel the policy would send waits, status deferred, reason
// scheduled, one timer row), and at its time the release runs the policy again, quiet hours
// included, and renders then.
const { database, bus, clock, deps } = await processorFixture(t);
const accepted = new Date("2026-06-01T10:00:00Z");
const sendAt = new Date("2026-06-01T18:00:00Z");
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);
const timers = async (id: string) =>
  (await database.sql<{ due_at: Date }[]>`select due_at from deferred_notifications where notification_id = ${id}`).map(
    (r) => r.due_at.toISOString(),
  );

async function schedule(userId: string, over: Partial<Parameters<typeof storeNotifications>[2][number]> = {}) {
  const lane = await laneDeps(deps, "transactional");
  clock.now = accepted;
  const [message] = await storeNotifications(database, bus, [
    { user_id: userId, priority: "transactional", send_at: sendAt.toISOString(), ...over },
  ]);
  if (!message) throw new Error("not stored");
  t.equal(await routeNotification(lane, message), "routed");
  return message;
}

t.test("held until its send time, then routed once, rendered then", async (t) => {
  await seedUser(database, "sch-1");
  const message = await schedule("sch-1", { channels: ["email", "sms"] });
  const rows = await channelRows(database, message.notification_id);
  t.same(rows.email, { status: "deferred", reason: "scheduled", at: sendAt });
  t.same(rows.sms, { status: "deferred", reason: "scheduled", at: sendAt });
  t.same(await timers(message.notification_id), [sendAt.toISOString()]);
  t.same(await itemsOf(message.notification_id), [], "nothing queued before its time");

  const lane = await laneDeps(deps, "transactional");
  clock.now = new Date(sendAt.getTime() - 1);
  t.same(await releaseDue(lane), { settled: 0, published: 0, redeferred: 0 }, "never early");
  clock.now = sendAt;
  t.same(await releaseDue(lane), { settled: 1, published: 2, redeferred: 0 });
  const items = await itemsOf(message.notification_id);
  t.same(items.map((i) => i.item.channel).sort(), ["email", "sms"]);
  t.match(items.find((i) => i.item.channel === "email")?.item, { to: "sch-1@example.com", subject: "Hi Ada" });
  t.same(await timers(message.notification_id), []);
  t.same(await releaseDue(lane), { settled: 0, published: 0, redeferred: 0 }, "released once");
});

t.test("a redelivered lane message schedules nothing twice and queues nothing", async (t) => {
  await seedUser(database, "sch-dup");
  // A later day's send time: the releases of the other tests leave it alone.
  const later = "2026-06-09T18:00:00.000Z";
  const message = await schedule("sch-dup", { send_at: later });
  const lane = await laneDeps(deps, "transactional");
  t.equal(await routeNotification(lane, message), "duplicate");
  t.same(await timers(message.notification_id), [later]);
  t.same(await itemsOf(message.notification_id), []);
});

t.test("quiet hours apply at the send time, and preferences as they are then", async (t) => {
  const quiet = { start: "17:00", end: "21:00", tz: "UTC" };
  await seedUser(database, "sch-quiet", { quiet_hours: quiet });
  await seedUser(database, "sch-opt");
  const promo = await schedule("sch-quiet", { priority: "promotional" });
  const optOut = await schedule("sch-opt");
  t.same((await channelRows(database, promo.notification_id)).email?.reason, "scheduled", "not quiet at 10:00");
  await seedUser(database, "sch-opt", { channel_optout: ["email"] });

  clock.now = sendAt;
  const lane = await laneDeps(deps, "promotional");
  const released = await releaseDue(lane);
  t.same(released, { settled: 2, published: 0, redeferred: 1 });
  t.same((await channelRows(database, promo.notification_id)).email, {
    status: "deferred",
    reason: "quiet_hours",
    at: new Date("2026-06-01T21:00:00Z"),
  });
  t.same((await channelRows(database, optOut.notification_id)).email, {
    status: "suppressed",
    reason: "opted_out",
    at: null,
  });
});

t.test("a send time already past routes at once", async (t) => {
  await seedUser(database, "sch-past");
  const message = await schedule("sch-past", { send_at: "2026-06-01T09:00:00Z" });
  t.same((await channelRows(database, message.notification_id)).email?.status, "pending");
  t.equal((await itemsOf(message.notification_id)).length, 1);
});

t.test("a deadline before the send time expires the channel rather than holding it", async (t) => {
  await seedUser(database, "sch-late");
  const message = await schedule("sch-late", { deliver_by: "2026-06-01T12:00:00Z" });
  t.same((await channelRows(database, message.notification_id)).email, {
    status: "expired",
    reason: "deadline_before_send_at",
    at: null,
  });
  t.same(await timers(message.notification_id), []);
});

t.test("a scheduled notification whose lane message was lost is scheduled by the reconciler", async (t) => {
  await seedUser(database, "sch-lost");
  clock.now = accepted;
  const [message] = await storeNotifications(database, bus, [
    { user_id: "sch-lost", priority: "transactional", send_at: sendAt.toISOString() },
  ]);
  if (!message) throw new Error("not stored");
  // Its lane message never went out; the reconciler routes it from the row, send time included.
  await reconcile(
    {
      lanes: { transactional: await laneDeps(deps, "transactional"), promotional: await laneDeps(deps, "promotional") },
      database,
      bus,
      log: deps.log,
      onFound: () => {},
    },
    { afterMs: 20_000, lookbackMs: 3_600_000, now: () => Date.now() + 60_000 },
  );
  t.same((await channelRows(database, message.notification_id)).email, {
    status: "deferred",
    reason: "scheduled",
    at: sendAt,
  });
});
