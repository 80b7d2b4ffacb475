import type { LaneMessage } from "@notify/core";
import { eventually } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { channelRows, processorFixture, publishLane, seedUser, storeNotifications, workItems } from "./helpers.js";

// A lane message can come back after the ones behind it: its delivery was lost in transit (a
// NATS node or the connection went down with it in flight), or its partition changed hands while
// the last holder still worked on it. It is delivered again after the ack wait; meanwhile the
// next message of the same user must not be routed past it.
const { database, bus, deps, lines } = await processorFixture(t, { partitions: 1 });
deps.now = () => new Date();
const runners = await startConsumers({ ...deps, orderHold: { delayMs: 100, deliveries: 10_000 } });
t.teardown(() => Promise.all(runners.map((r) => r.stop())));

/** One notification per statement, so that each is created after the one before. */
async function oneByOne(user: string, count: number, priority: "promotional" | "transactional" = "promotional") {
  const messages: LaneMessage[] = [];
  for (let i = 0; i < count; i++) {
    const [message] = await storeNotifications(database, bus, [{ user_id: user, priority, data: { name: `#${i}` } }]);
    messages.push(message as LaneMessage);
  }
  return messages;
}

const routed = async (id: string) => Object.keys(await channelRows(database, id)).length > 0;
const heldCount = (id: string) =>
  lines().filter((line) => line.includes(id) && line.includes("held behind the user's previous notification")).length;

t.test("a later message waits for the user's earlier one that comes back late, then all go in order", async (t) => {
  await seedUser(database, "late");
  await seedUser(database, "bystander");
  const late = await oneByOne("late", 4);
  const others = await oneByOne("bystander", 2);
  // The same user id under another client, never published: not this user's predecessor.
  await database.sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values ('other-client-1', 'another-shop', 'late', 'news', 'promo', 'promotional', '{}', 'other-client-1', 'h', 0)`;
  const [m0, m1, m2, m3] = late as [LaneMessage, LaneMessage, LaneMessage, LaneMessage];
  // #1's delivery is "lost": published only later.
  await publishLane(bus, [m0, m2, m3, ...others], 1);

  await eventually(async () => (await routed(m0.notification_id)) || undefined, 20_000, "#0 routed");
  await eventually(async () => heldCount(m2.notification_id) >= 3 || undefined, 20_000, "#2 held a few times");
  t.notOk(await routed(m2.notification_id), "#2 is not routed while #1 is missing");
  t.notOk(await routed(m3.notification_id), "nor #3, behind it");
  for (const other of others) t.ok(await routed(other.notification_id), "another user's messages are not held");

  await publishLane(bus, [m1], 1);
  await eventually(async () => (await routed(m3.notification_id)) || undefined, 20_000, "#3 routed");
  const order = (await workItems(bus))
    .map((w) => w.item.notification_id)
    .filter((id) => late.some((m) => m.notification_id === id));
  t.same(
    order,
    late.map((m) => m.notification_id),
    "work items published in the order the notifications were accepted",
  );
  t.same(await channelRows(database, "other-client-1"), {}, "the other client's notification was never routed");
});

t.test("the lanes are ordered apart: a transactional message does not wait for a promotional one", async (t) => {
  await seedUser(database, "two-lanes");
  const [promo] = await oneByOne("two-lanes", 1, "promotional");
  const [urgent] = await oneByOne("two-lanes", 1, "transactional");
  await publishLane(bus, [urgent as LaneMessage], 1);
  await eventually(async () => (await routed((urgent as LaneMessage).notification_id)) || undefined, 20_000);
  t.notOk(await routed((promo as LaneMessage).notification_id), "the promotional one was never published");
  t.equal(heldCount((urgent as LaneMessage).notification_id), 0, "never held");
});

t.test("an earlier message that never comes back holds the next one only for the hold budget", async (t) => {
  const { database: db2, bus: bus2, deps: deps2, lines: lines2 } = await processorFixture(t, { partitions: 1 });
  deps2.now = () => new Date();
  const runners2 = await startConsumers({ ...deps2, orderHold: { delayMs: 50, deliveries: 3 } });
  t.teardown(() => Promise.all(runners2.map((r) => r.stop())));
  await seedUser(db2, "orphaned");
  const [lost] = await storeNotifications(db2, bus2, [{ user_id: "orphaned" }]);
  const [next] = await storeNotifications(db2, bus2, [{ user_id: "orphaned" }]);
  await publishLane(bus2, [next as LaneMessage], 1);
  const id = (next as LaneMessage).notification_id;
  await eventually(
    async () => Object.keys(await channelRows(db2, id)).length > 0 || undefined,
    20_000,
    "routed once the budget is spent",
  );
  const held = lines2().filter((line) => line.includes(id) && line.includes("held behind")).length;
  t.equal(held, 3, "held once per delivery of the budget");
  t.ok(
    lines2().some((line) => line.includes(id) && line.includes((lost as LaneMessage).notification_id)),
    "the warning names the notification it passed",
  );
});
