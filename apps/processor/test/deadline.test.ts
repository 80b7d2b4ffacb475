import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { releaseDue } from "../src/deferral/release.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// Deliver-by deadlines in the processor, against a real Postgres and NATS namespace: nothing is
// queued or held that could only go out after the notification's deadline.
const { database, bus, clock, deps } = await processorFixture(t);
const night = new Date("2026-06-01T22:30:00Z"); // 23:30 BST
const morning = new Date("2026-06-02T06:00:00Z"); // 07:00 BST, the quiet window's end
const quiet = { start: "22:00", end: "07:00", tz: "Europe/London" };
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);
const at = (date: Date, ms: number) => new Date(date.getTime() + ms).toISOString();

async function route(n: Parameters<typeof storeNotifications>[2][number]) {
  const [message] = await storeNotifications(database, bus, [n]);
  if (!message) throw new Error("not stored");
  const lane = await laneDeps(deps, message.priority);
  const outcome = await routeNotification(lane, message);
  return { message, outcome, channels: await channelRows(database, message.notification_id) };
}

t.test("routed before its deadline: queued, and the work item carries the deadline", async (t) => {
  clock.now = new Date("2026-06-01T12:00:00Z");
  await seedUser(database, "dl-1");
  const deadline = at(clock.now, 60_000);
  const { message, channels } = await route({ user_id: "dl-1", channels: ["email", "sms"], deliver_by: deadline });
  t.same(channels.email, { status: "pending", reason: null, at: null });
  const items = await itemsOf(message.notification_id);
  t.equal(items.length, 2);
  t.ok(
    items.every((i) => i.item.deliver_by === deadline),
    "every channel's item carries it",
  );
});

t.test("routed after its deadline (a backlog, an outage): every channel expires, nothing is queued", async (t) => {
  clock.now = new Date("2026-06-01T12:00:00Z");
  await seedUser(database, "dl-2", { channel_optout: ["sms"] });
  const { message, channels } = await route({
    user_id: "dl-2",
    channels: ["email", "sms", "in_app"],
    deliver_by: at(clock.now, -1),
  });
  t.same(channels, {
    email: { status: "expired", reason: "deadline_passed", at: null },
    in_app: { status: "expired", reason: "deadline_passed", at: null },
    sms: { status: "suppressed", reason: "opted_out", at: null },
  });
  t.same(await itemsOf(message.notification_id), [], "nothing queued");
});

t.test("quiet hours that end after the deadline: expired at routing, no timer is set", async (t) => {
  await seedUser(database, "dl-3", { quiet_hours: quiet });
  clock.now = night;
  const { message, channels } = await route({ user_id: "dl-3", deliver_by: at(morning, -60_000) });
  t.same(channels.email, { status: "expired", reason: "deadline_before_quiet_hours_end", at: null });
  const timers =
    await database.sql`select 1 from deferred_notifications where notification_id = ${message.notification_id}`;
  t.equal(timers.length, 0);
});

t.test("a deferral released after its deadline (the scheduler was down) expires instead of being sent", async (t) => {
  await seedUser(database, "dl-4", { quiet_hours: quiet });
  clock.now = night;
  const { message, channels } = await route({ user_id: "dl-4", deliver_by: at(morning, 60_000) });
  t.match(channels.email, { status: "deferred" }, "held: the window ends before the deadline");
  clock.now = new Date(morning.getTime() + 120_000);
  const released = await releaseDue(await laneDeps(deps, "promotional"));
  t.match(released, { settled: 1, published: 0 });
  t.same((await channelRows(database, message.notification_id)).email, {
    status: "expired",
    reason: "deadline_passed",
    at: null,
  });
  t.same(await itemsOf(message.notification_id), [], "nothing queued");
  const [event] = await database.sql<{ status: string; reason: string }[]>`
    select status, reason from channel_status_events where notification_id = ${message.notification_id}`;
  t.same(event, { status: "expired", reason: "deadline_passed" }, "the expiry is in the channel's history");
});
