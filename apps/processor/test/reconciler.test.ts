import { withSweepLock } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { type Found, type ReconcilerDeps, reconcile } from "../src/reconciler/reconciler.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, publishLane, seedUser, storeNotifications, workItems } from "./helpers.js";

// The reconciler against a real Postgres and NATS namespace, with no lane consumer or worker
// running: what it finds stalled, what it leaves alone because NATS still holds its message, and
// that it drives each stall on once.
const { database, bus, deps } = await processorFixture(t);
const found: Array<[string, number]> = [];
const reconcilerDeps: ReconcilerDeps = {
  lanes: { transactional: await laneDeps(deps, "transactional"), promotional: await laneDeps(deps, "promotional") },
  database,
  bus,
  log: deps.log,
  onFound: (kind, count) => found.push([kind, count]),
};
await seedUser(database, "rec-1");
// Work counts as stalled after 20 s unchanged; each round looks from a minute ahead.
const round = (): Promise<Found | undefined> =>
  reconcile(reconcilerDeps, { afterMs: 20_000, lookbackMs: 3_600_000, now: () => Date.now() + 60_000 });
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);
const purgeWork = () => bus.jsm.streams.purge(bus.streams.work);
const purgeLanes = async () => {
  await bus.jsm.streams.purge(bus.streams.lane("promotional"));
  await bus.jsm.streams.purge(bus.streams.lane("transactional"));
};
// Each test starts from settled work: what an earlier one left waiting is delivered.
t.beforeEach(async () => {
  await database.sql`update notification_channels set status = 'delivered' where status <> 'delivered'`;
  await purgeWork();
  await purgeLanes();
});

t.test("accepted, its lane message gone: routed once through the normal path", async (t) => {
  const [message] = await storeNotifications(database, bus, [{ user_id: "rec-1", channels: ["email", "sms"] }]);
  if (!message) throw new Error("not stored");
  const first = await round();
  t.match(first, { unrouted: 1 });
  t.match(await channelRows(database, message.notification_id), {
    email: { status: "pending" },
    sms: { status: "pending" },
  });
  const items = await itemsOf(message.notification_id);
  t.same(items.map((i) => i.item.channel).sort(), ["email", "sms"], "its work items are queued");
  t.match(await round(), { unrouted: 0, unsent: 0 }, "the next round finds nothing");
  t.equal((await itemsOf(message.notification_id)).length, 2, "and publishes nothing more");
  t.ok(
    found.some(([kind]) => kind === "unrouted"),
    "the metric counts it",
  );
});

t.test("accepted, its lane message still queued: left to the lane consumer", async (t) => {
  const [message] = await storeNotifications(database, bus, [{ user_id: "rec-1" }]);
  if (!message) throw new Error("not stored");
  await publishLane(bus, [message]);
  t.match(await round(), { unrouted: 0 });
  t.same(await channelRows(database, message.notification_id), {}, "not routed behind the consumer's back");
  // Once the message is gone (acknowledged without routing: a crash between the two, or a lost
  // write on the server), the next round routes it.
  await purgeLanes();
  t.match(await round(), { unrouted: 1 });
  t.match(await channelRows(database, message.notification_id), { email: { status: "pending" } });
});

t.test("routed, its work item gone: published again, once", async (t) => {
  const [message] = await storeNotifications(database, bus, [{ user_id: "rec-1", channels: ["email"] }]);
  if (!message) throw new Error("not stored");
  await routeNotification(reconcilerDeps.lanes.promotional, message);
  t.match(await round(), { unsent: 0 }, "while its item is queued, nothing is done");
  await purgeWork();
  t.match(await round(), { unsent: 1 });
  const items = await itemsOf(message.notification_id);
  t.equal(items.length, 1, "its work item is back");
  t.match(items[0]?.item, { channel: "email", to: "rec-1@example.com", subject: "Hi Ada" });
  t.match(await round(), { unsent: 0 }, "a round later it is queued, not stalled");
  t.equal((await itemsOf(message.notification_id)).length, 1);
});

t.test(
  "retrying with its item still in the stream is left alone; released from quiet hours and lost is sent",
  async (t) => {
    const [retrying, deferred] = await storeNotifications(database, bus, [
      { user_id: "rec-1", channels: ["email"] },
      { user_id: "rec-1", channels: ["sms"] },
    ]);
    if (!retrying || !deferred) throw new Error("not stored");
    await routeNotification(reconcilerDeps.lanes.promotional, retrying);
    await database.sql`update notification_channels set status = 'retrying', next_attempt_at = now() - interval '1 minute'
    where notification_id = ${retrying.notification_id}`;
    // A channel released from quiet hours stays deferred until its worker moves it; its timer is gone.
    await database.sql`insert into notification_channels (notification_id, channel, status, next_attempt_at, updated_at)
    values (${deferred.notification_id}, 'sms', 'deferred', now() - interval '1 minute', now() - interval '8 hours')`;
    t.match(await round(), { unsent: 1 });
    t.same(
      (await workItems(bus)).map(
        (w) => `${w.item.notification_id === retrying.notification_id ? "retrying" : "deferred"}:${w.item.channel}`,
      ),
      ["retrying:email", "deferred:sms"],
      "the retrying item was not published twice; the released one was published",
    );
  },
);

t.test("an in-app send left unsettled is settled from the inbox", async (t) => {
  const [message] = await storeNotifications(database, bus, [{ user_id: "rec-1", channels: ["in_app"] }]);
  if (!message) throw new Error("not stored");
  await database.sql`insert into notification_channels (notification_id, channel, status, reason, attempts, updated_at)
    values (${message.notification_id}, 'in_app', 'unsettled', 'worker gone', 1, now())`;
  await database.sql`insert into inbox_items (user_id, notification_id, category, body)
    values ('rec-1', ${message.notification_id}, 'news', 'Hi')`;
  t.match(await round(), { in_app_unsettled: 1 });
  t.match(await channelRows(database, message.notification_id), {
    in_app: { status: "delivered", reason: "settled from the inbox" },
  });
});

t.test("one instance at a time: a round while another holds the lock does nothing", async (t) => {
  const [message] = await storeNotifications(database, bus, [{ user_id: "rec-1" }]);
  if (!message) throw new Error("not stored");
  const inner = await withSweepLock(database, "notify.reconciler", () => round());
  t.equal(inner, undefined, "skipped");
  t.same(await channelRows(database, message.notification_id), {});
  t.match(await round(), { unrouted: 1 }, "the next round, lock free, does it");
});

t.test("the scan goes on from where it stopped, kept in Postgres", async (t) => {
  const [{ position } = { position: "" }] = await database.sql<{ position: string }[]>`
    select position from sweep_positions where name = 'reconciler.notifications'`;
  const [latest] = await database.sql<{ id: string }[]>`select max(id) as id from notifications`;
  t.equal(position, latest?.id, "the position is the last notification looked at");
});
