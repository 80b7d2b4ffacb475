import type { Bus } from "@notify/bus";
import type { LaneMessage } from "@notify/core";
import type { Database } from "@notify/db";
import { eventually } from "@notify/testing";
import t from "tap";
import { partitionDurable, startConsumers } from "../src/consumers.js";
import { channelRows, processorFixture, publishLane, seedUser, storeNotifications, workItems } from "./helpers.js";

// A lane message can come back after the ones behind it: a processor died with it in hand, its
// delivery was lost in transit (a NATS node or the connection went down with it in flight), or
// its partition changed hands while the last holder still worked on it. It is delivered again
// after the ack wait; meanwhile the next message of the same user must not be routed past it.

/** One notification per statement, so that each is created after the one before. */
async function oneByOne(database: Database, bus: Bus, user: string, count: number, priority = "promotional") {
  const messages: LaneMessage[] = [];
  for (let i = 0; i < count; i++) {
    const [message] = await storeNotifications(database, bus, [
      { user_id: user, priority: priority as LaneMessage["priority"], data: { name: `#${i}` } },
    ]);
    messages.push(message as LaneMessage);
  }
  return messages;
}

/** A reader of the lane's only partition that takes one delivery and dies with it in hand. */
async function takeAndDie(bus: Bus, priority: LaneMessage["priority"] = "promotional") {
  const consumer = await bus.js.consumers.get(bus.streams.lane(priority), partitionDurable(priority, 0));
  const msg = await consumer.next({ expires: 5000 });
  if (!msg) throw new Error("nothing to take");
  return msg.json<LaneMessage>();
}

t.test("a message waits for the user's earlier one that a dead reader had in hand, then all go in order", async (t) => {
  const { database, bus, deps, lines } = await processorFixture(t, { partitions: 1 });
  deps.now = () => new Date();
  const routed = async (id: string) => Object.keys(await channelRows(database, id)).length > 0;
  const held = (id: string) =>
    lines().filter((line) => line.includes(id) && line.includes("held behind the user's previous notification")).length;
  await seedUser(database, "late");
  await seedUser(database, "bystander");
  const late = await oneByOne(database, bus, "late", 4);
  const [m0, m1, m2, m3] = late as [LaneMessage, LaneMessage, LaneMessage, LaneMessage];
  const others = await oneByOne(database, bus, "bystander", 2);
  // The same user id under another client, never published: not this user's predecessor.
  await database.sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values ('other-client-1', 'another-shop', 'late', 'news', 'promo', 'promotional', '{}', 'other-client-1', 'h', 0)`;

  await publishLane(bus, [m0], 1);
  t.equal((await takeAndDie(bus)).notification_id, m0.notification_id, "#0 is in a dead reader's hand");
  await publishLane(bus, [m1, m2, m3, ...others], 1);
  const runners = await startConsumers({ ...deps, orderHold: { delayMs: 200, deliveries: 10_000 } });
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));

  await eventually(async () => held(m1.notification_id) >= 2 || undefined, 20_000, "#1 held");
  t.notOk(await routed(m0.notification_id), "#0 is not back yet (its ack wait runs)");
  t.notOk(await routed(m1.notification_id), "#1 is not routed while #0 is out");
  t.notOk(await routed(m3.notification_id), "nor #3, behind it");
  for (const other of others) t.ok(await routed(other.notification_id), "another user's messages are not held");

  await eventually(async () => (await routed(m3.notification_id)) || undefined, 30_000, "#3 routed");
  // A work item is published once its rows are committed: wait for the last one too.
  const lateItems = async () =>
    (await workItems(bus))
      .map((w) => w.item.notification_id)
      .filter((id) => late.some((m) => m.notification_id === id));
  const order = await eventually(
    async () => {
      const items = await lateItems();
      return items.length >= late.length ? items : undefined;
    },
    20_000,
    "the four work items published",
  );
  t.same(
    order,
    late.map((m) => m.notification_id),
    "work items published in the order the notifications were accepted",
  );
  t.same(await channelRows(database, "other-client-1"), {}, "the other client's notification was never routed");
});

t.test("the lanes are ordered apart: a transactional message does not wait for a promotional one", async (t) => {
  const { database, bus, deps, lines } = await processorFixture(t, { partitions: 1 });
  deps.now = () => new Date();
  await seedUser(database, "two-lanes");
  const [promo] = (await oneByOne(database, bus, "two-lanes", 1, "promotional")) as [LaneMessage];
  const [urgent, after] = (await oneByOne(database, bus, "two-lanes", 2, "transactional")) as [
    LaneMessage,
    LaneMessage,
  ];
  // The transactional partition is in doubt (a delivery in a dead reader's hand) and the
  // user's promotional notification is unrouted: the transactional one must not wait for it.
  await publishLane(bus, [urgent], 1);
  await takeAndDie(bus, "transactional");
  await publishLane(bus, [after], 1);
  const runners = await startConsumers({ ...deps, orderHold: { delayMs: 200, deliveries: 10_000 } });
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));
  await eventually(
    async () => Object.keys(await channelRows(database, urgent.notification_id)).length || undefined,
    30_000,
  );
  await eventually(
    async () => Object.keys(await channelRows(database, after.notification_id)).length || undefined,
    30_000,
  );
  t.same(await channelRows(database, promo.notification_id), {}, "the promotional one was never published");
  t.ok(
    lines().some((l) => l.includes(after.notification_id) && l.includes("held behind")),
    "the later transactional one waited for the earlier transactional one",
  );
  t.notOk(
    lines().some((l) => l.includes(urgent.notification_id) && l.includes("held behind")),
    "the earlier transactional one never waited for the promotional one",
  );
});

t.test("an earlier message that never comes back holds the next one only for the hold budget", async (t) => {
  const { database, bus, deps, lines } = await processorFixture(t, { partitions: 1 });
  deps.now = () => new Date();
  await seedUser(database, "orphaned");
  await seedUser(database, "someone");
  const [lost, next] = (await oneByOne(database, bus, "orphaned", 2)) as [LaneMessage, LaneMessage];
  // Another user's delivery in a dead reader's hand puts the partition in doubt.
  const [other] = (await oneByOne(database, bus, "someone", 1)) as [LaneMessage];
  await publishLane(bus, [other], 1);
  await takeAndDie(bus);
  await publishLane(bus, [next], 1);
  const counted: string[] = [];
  const runners = await startConsumers({
    ...deps,
    orderHold: { delayMs: 50, deliveries: 3 },
    onOrderHold: (lane, outcome) => counted.push(`${lane}:${outcome}`),
  });
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));
  await eventually(
    async () => Object.keys(await channelRows(database, next.notification_id)).length > 0 || undefined,
    20_000,
    "routed once the budget is spent",
  );
  // The rows are committed before the processor hears so: its warning and count come after.
  await eventually(async () => counted.includes("promotional:passed") || undefined, 20_000, "counted as passed");
  const held = lines().filter((line) => line.includes(next.notification_id) && line.includes("held behind")).length;
  t.equal(held, 3, "held once per delivery of the budget");
  t.ok(
    lines().some(
      (line) =>
        line.includes('"level":40') && line.includes(next.notification_id) && line.includes(lost.notification_id),
    ),
    "a warning names the notification it passed",
  );
  t.same(
    counted,
    ["promotional:held", "promotional:held", "promotional:held", "promotional:passed"],
    "counted for the metrics",
  );
});
