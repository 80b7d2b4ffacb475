import { createDb } from "@notify/db";
import { eventually, streamCount } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { processorFixture, publishLane, storeNotifications } from "./helpers.js";

// Transactional never waits behind promotional (invariant 4): 20,000 promotional lane
// messages are queued before the processor starts, then one transactional message arrives
// while the promotional backlog drains. The lanes have their own consumers, concurrency and
// Postgres pools, so the transactional one is routed long before the flood has drained.
const FLOOD = 20_000;
const USERS = 2_000;
const { url, database, bus, deps, clock } = await processorFixture(t, { partitions: 4, ttlMs: 5000 });
clock.now = new Date();
const pools = {
  transactional: createDb({ url, max: 5, applicationName: "flood-transactional" }),
  promotional: createDb({ url, max: 10, applicationName: "flood-promotional" }),
};
t.teardown(() => Promise.all([pools.transactional.close(), pools.promotional.close()]));
deps.databases = pools;

const users = Array.from({ length: USERS }, (_, i) => `flood-${i}`);
await database.sql`insert into user_contacts (user_id, email)
  select u, u || '@example.com' from unnest(${users}::text[]) as u`;
const routedPromotional = async () =>
  Number(
    (
      await database.sql`select count(*)::int as n from notification_channels c join notifications n on n.id = c.notification_id
        where n.priority = 'promotional'`
    )[0]?.n,
  );

t.test("a transactional notification is routed while 20,000 promotional ones are still draining", async (t) => {
  const flood = await storeNotifications(
    database,
    bus,
    Array.from({ length: FLOOD }, (_, i) => ({ user_id: users[i % USERS] as string, category: "deals" })),
  );
  const published = Date.now();
  await publishLane(bus, flood);
  t.comment(`published ${FLOOD} promotional lane messages in ${Date.now() - published} ms`);
  t.equal(await streamCount(bus, bus.streams.lane("promotional")), FLOOD, "the whole flood is queued");

  const started = Date.now();
  const runners = await startConsumers(deps);
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));
  await eventually(async () => ((await routedPromotional()) >= 500 ? true : undefined), 30_000, "the flood under way");

  const [urgent] = await storeNotifications(database, bus, [
    { user_id: "flood-urgent", category: "security", priority: "transactional", channels: ["in_app"] },
  ]);
  if (!urgent) throw new Error("not stored");
  const sent = Date.now();
  await publishLane(bus, [urgent]);
  const { backlog, routedBefore } = await eventually(
    async () => {
      const [row] =
        await database.sql`select status from notification_channels where notification_id = ${urgent.notification_id}`;
      if (!row) return undefined;
      return {
        backlog: await streamCount(bus, bus.streams.lane("promotional")),
        routedBefore: await routedPromotional(),
      };
    },
    30_000,
    "the transactional notification routed",
  );
  t.comment(
    `transactional routed ${Date.now() - sent} ms after publish; promotional then: ${routedBefore} routed, ${backlog} still in the lane`,
  );
  t.ok(backlog > 0, "the promotional backlog had not drained when the transactional one was routed");
  t.ok(routedBefore < FLOOD, "not every promotional one had been routed yet");

  await eventually(
    async () => ((await routedPromotional()) === FLOOD ? true : undefined),
    90_000,
    "the promotional flood to drain",
  );
  t.comment(`the flood drained ${Date.now() - started} ms after the processor started`);
  t.equal(await streamCount(bus, bus.streams.lane("promotional")), 0, "every promotional message acknowledged");
  t.equal(
    Number((await database.sql`select count(*)::int as n from notification_channels where status = 'pending'`)[0]?.n),
    FLOOD + 1,
    "each routed once",
  );
});
