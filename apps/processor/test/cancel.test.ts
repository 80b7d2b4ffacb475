import { randomUUID } from "node:crypto";
import { readGuard } from "@notify/bus";
import { guardKey } from "@notify/core";
import { checkCompletions } from "@notify/db";
import { cancelChannels } from "@notify/ops";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { releaseDue } from "../src/deferral/release.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// The processor's cancel (libs/ops cancelChannels, what notify.ops.cancel runs) against the
// processor's own routing and deferral release, on a real database and NATS namespace: a
// deferred notification canceled before its window ends is never released, a release in
// progress is waited for, and what the cancel moved is an event like any outcome.
const { database, bus, clock, deps } = await processorFixture(t);
const guard = await bus.kv("notify_send_guard");
const night = new Date("2026-06-01T22:30:00Z"); // 23:30 BST
const morning = new Date("2026-06-02T06:00:00Z"); // 07:00 BST, the window's end
const quiet = { start: "22:00", end: "07:00", tz: "Europe/London" };

const cancel = (id: string, clientId = "shop") =>
  cancelChannels({ database, guard }, { notification_id: id, requested_by: { key_id: "key-1", client_id: clientId } });
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);
const history = (id: string) =>
  database.sql<{ channel: string; status: string; reason: string | null }[]>`
    select channel, status, reason from channel_status_events where notification_id = ${id} order by channel, id`;
const timers = async (id: string) =>
  (await database.sql`select 1 from deferred_notifications where notification_id = ${id}`).length;

async function deferOne(userId: string, channels: Array<"email" | "push" | "sms"> = ["email", "push"]) {
  const lane = await laneDeps(deps, "promotional");
  clock.now = night;
  const [message] = await storeNotifications(database, bus, [{ user_id: userId, channels }]);
  if (!message) throw new Error("not stored");
  await routeNotification(lane, message);
  return message.notification_id;
}

t.test("a deferred notification: canceled with its history, its timer gone, never released", async (t) => {
  await seedUser(database, "cancel-night", { quiet_hours: quiet });
  const id = await deferOne("cancel-night");
  t.same(
    Object.values(await channelRows(database, id)).map((c) => c.status),
    ["deferred", "deferred"],
  );
  t.equal(await timers(id), 1);

  t.same(await cancel(id), {
    outcome: "done",
    channels: { email: { result: "canceled", why: null }, push: { result: "canceled", why: null } },
  });
  t.same(await channelRows(database, id), {
    email: { status: "canceled", reason: "canceled_by_client", at: null },
    push: { status: "canceled", reason: "canceled_by_client", at: null },
  });
  t.same(
    (await history(id)).filter((h) => h.status === "canceled"),
    [
      { channel: "email", status: "canceled", reason: "canceled_by_client: key key-1" },
      { channel: "push", status: "canceled", reason: "canceled_by_client: key key-1" },
    ],
    "each move has its history row, naming the key",
  );
  t.equal(await timers(id), 0, "the deferral timer is gone");
  for (const channel of ["email", "push"] as const) {
    t.match((await readGuard(guard, guardKey(id, channel)))?.value, { state: "canceled" }, `${channel}'s guard`);
  }

  clock.now = new Date(morning.getTime() + 60_000);
  const lane = await laneDeps(deps, "promotional");
  t.same(await releaseDue(lane), { settled: 0, published: 0, redeferred: 0 }, "nothing to release");
  t.same(await itemsOf(id), [], "no work item was ever published");

  const before = (await history(id)).length;
  t.same(
    await cancel(id),
    {
      outcome: "done",
      channels: {
        email: { result: "already_canceled", why: null },
        push: { result: "already_canceled", why: null },
      },
    },
    "a second cancel changes nothing",
  );
  t.equal((await history(id)).length, before, "and writes no history");
});

t.test("another client's notification is not found; one not routed yet writes nothing", async (t) => {
  await seedUser(database, "cancel-other", { quiet_hours: quiet });
  const id = await deferOne("cancel-other");
  t.same(await cancel(id, "bank"), { outcome: "not_found" });
  t.same(
    Object.values(await channelRows(database, id)).map((c) => c.status),
    ["deferred", "deferred"],
    "untouched",
  );
  t.same(await cancel(randomUUID()), { outcome: "not_found" });

  const [unrouted] = await storeNotifications(database, bus, [{ user_id: "cancel-other" }]);
  if (!unrouted) throw new Error("not stored");
  t.same(await cancel(unrouted.notification_id), { outcome: "not_routed" });
  t.same(await channelRows(database, unrouted.notification_id), {}, "still unrouted");
  t.equal(await readGuard(guard, guardKey(unrouted.notification_id, "email")), null, "no guard taken");
  t.match(await cancel(id), { outcome: "done", channels: { email: { result: "canceled" } } }, "its own client may");
});

t.test("a release in progress is waited for; the channel it released is canceled by its guard", async (t) => {
  await seedUser(database, "cancel-race", { quiet_hours: quiet });
  const id = await deferOne("cancel-race", ["email"]);
  clock.now = morning;
  // The release publishes inside its transaction, holding the timer row: held there until let go.
  let entered = () => {};
  const inside = new Promise<void>((resolve) => {
    entered = resolve;
  });
  let letGo = () => {};
  const gate = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  const lane = await laneDeps(deps, "promotional");
  const gated = {
    ...lane,
    bus: {
      ...bus,
      publish: async (...args: Parameters<typeof bus.publish>) => {
        entered();
        await gate;
        return bus.publish(...args);
      },
    },
  };
  const releasing = releaseDue(gated);
  await inside;
  let answered = false;
  const canceling = cancel(id).then((answer) => {
    answered = true;
    return answer;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.notOk(answered, "the cancel waits for the release's lock on the timer");
  letGo();
  t.same(await releasing, { settled: 1, published: 1, redeferred: 0 });
  t.same(await canceling, { outcome: "done", channels: { email: { result: "canceled", why: null } } });
  t.equal((await itemsOf(id)).length, 1, "the release published its work item");
  t.match(
    (await readGuard(guard, guardKey(id, "email")))?.value,
    { state: "canceled" },
    "whose worker finds the guard canceled",
  );
  t.same((await channelRows(database, id)).email, { status: "canceled", reason: "canceled_by_client", at: null });
  t.equal(await timers(id), 0);
});

t.test("a cancel is an outcome: channel.canceled, the fallback chain ended, notification.completed", async (t) => {
  await database.sql`
    insert into webhook_endpoints (id, client_id, url, secret)
    values ('whe_cancel', 'shop', 'https://hooks.example.com/cancel', 'whsec_test')`;
  t.teardown(() => database.sql`delete from webhook_endpoints where id = 'whe_cancel'`);
  await seedUser(database, "cancel-hooks", { quiet_hours: quiet });
  const id = await deferOne("cancel-hooks", ["email"]);
  // A chain that would send an SMS once email failed or was suppressed: never, after a cancel.
  await database.sql`
    insert into notification_fallbacks (notification_id, steps, watching)
    values (${id}, ${database.sql.json([{ channel: "sms", when: ["failed", "suppressed"] }] as never)}, 'email')`;

  t.match(await cancel(id), { outcome: "done", channels: { email: { result: "canceled" } } });
  const [chain] = await database.sql<{ done: boolean }[]>`
    select done_at is not null as done from notification_fallbacks where notification_id = ${id}`;
  t.ok(chain?.done, "the fallback chain ended");
  const events = await database.sql<{ type: string; data: Record<string, unknown> }[]>`
    select type, data from webhook_events where notification_id = ${id} order by id`;
  t.match(
    events.filter((e) => e.type.startsWith("channel.")),
    [{ type: "channel.canceled", data: { channel: "email", status: "canceled", reason: "canceled_by_client" } }],
  );
  await checkCompletions(database, 100);
  const [completed] = await database.sql<{ data: { status: string; channels: Record<string, { status: string }> } }[]>`
    select data from webhook_events where notification_id = ${id} and type = 'notification.completed'`;
  t.match(completed?.data, { status: "canceled", channels: { email: { status: "canceled" } } });
  t.notOk("sms" in (await channelRows(database, id)), "no fallback channel was added");
});
