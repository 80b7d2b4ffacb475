import { eventually } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { processorFixture, publishLane, seedUser, storeNotifications, workItems } from "./helpers.js";

// One user's notifications are routed in the order they were published (invariant 5), even
// with many messages of a partition in flight at once. One partition, so that every user
// shares it and their messages interleave on one subject.
const PER_USER = 60;
const users = ["order-a", "order-b", "order-c", "order-d", "order-e"];
const { database, bus, deps } = await processorFixture(t, { partitions: 1, ttlMs: 5000 });
deps.partitionConcurrency = 32;
deps.now = () => new Date();
// One user has a daily cap that cuts their promotional sequence: the earliest ones must win it.
for (const user of users) await seedUser(database, user, user === "order-c" ? { rate_cap_per_day: 25 } : {});

t.test("a user's messages are routed in publish order while others' interleave", async (t) => {
  const messages = await storeNotifications(
    database,
    bus,
    Array.from({ length: PER_USER * users.length }, (_, i) => ({
      user_id: users[i % users.length] as string,
      priority: i % 3 === 0 ? ("transactional" as const) : ("promotional" as const),
      channels: ["email" as const],
      data: { name: `#${Math.floor(i / users.length)}` },
    })),
  );
  await publishLane(bus, messages, 64);
  const runners = await startConsumers(deps);
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));
  const items = await eventually(
    async () => {
      const [counts] = await database.sql`
        select count(*)::int as rows, (count(*) filter (where status = 'pending'))::int as pending
        from notification_channels`;
      // Rows are written before their work items are published: wait for both.
      const all = await workItems(bus);
      return counts?.rows === messages.length && all.length === counts?.pending ? all : undefined;
    },
    60_000,
    "every message routed",
  );

  for (const lane of ["transactional", "promotional"] as const) {
    for (const user of users) {
      const published = messages.filter((m) => m.user_id === user && m.priority === lane).map((m) => m.notification_id);
      const routed = items
        .filter((w) => w.item.user_id === user && w.item.priority === lane)
        .map((w) => w.item.notification_id);
      const sent = published.filter((id) => routed.includes(id));
      t.same(routed, sent, `${user}, ${lane}: work items in publish order (${routed.length} of ${published.length})`);
    }
  }
  const capped = items.filter((w) => w.item.user_id === "order-c" && w.item.priority === "promotional");
  t.equal(capped.length, 25, "the capped user's first 25 promotional messages went out, in order");
  const expected = messages
    .filter((m) => m.user_id === "order-c" && m.priority === "promotional")
    .slice(0, 25)
    .map((m) => m.notification_id);
  t.same(
    capped.map((w) => w.item.notification_id),
    expected,
    "the cap took the earliest ones: order held through the counter",
  );
});
