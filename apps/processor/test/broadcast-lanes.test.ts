import { createDb } from "@notify/db";
import { eventually } from "@notify/testing";
import t from "tap";
import { startExpander } from "../src/broadcasts/expander.js";
import { startConsumers } from "../src/consumers.js";
import { processorFixture, publishLane, storeNotifications } from "./helpers.js";

// Transactional traffic keeps flowing while a broadcast drains (invariant 4): the
// expander turns a 10,000-member broadcast into promotional lane messages while the consumers
// run; a transactional notification sent meanwhile is routed before the broadcast is.
const MEMBERS = 10_000;
const { url, database, bus, deps, log, clock } = await processorFixture(t, { partitions: 4, ttlMs: 5000 });
clock.now = new Date();
const pools = {
  transactional: createDb({ url, max: 5, applicationName: "broadcast-transactional" }),
  promotional: createDb({ url, max: 10, applicationName: "broadcast-promotional" }),
};
t.teardown(() => Promise.all([pools.transactional.close(), pools.promotional.close()]));
deps.databases = pools;

await database.sql`insert into audiences (id, name) values ('all', 'all')`;
await database.sql`insert into audience_members (audience_id, user_id)
  select 'all', 'member-' || n from generate_series(1, ${MEMBERS}) n`;
await database.sql`insert into user_contacts (user_id, email)
  select 'member-' || n, 'member-' || n || '@example.com' from generate_series(1, ${MEMBERS}) n`;
await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
    template_version, data, status, total)
  values ('bc', 'shop', 'k', 'h', 'all', 'deals', 'promo', 1, '{"name":"you"}', 'expanding', ${MEMBERS})`;

const routedRecipients = async () =>
  Number(
    (
      await database.sql`select count(distinct c.notification_id)::int as n
        from broadcast_recipients r join notification_channels c on c.notification_id = r.notification_id
        where r.broadcast_id = 'bc'`
    )[0]?.n,
  );

t.test("a transactional notification is routed while a broadcast is still draining", async (t) => {
  const runners = await startConsumers(deps);
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));
  const expander = startExpander({ database: pools.promotional, bus, log }, { intervalMs: 50, batchSize: 500 });
  t.teardown(() => expander.stop());
  await eventually(
    async () => ((await routedRecipients()) >= 300 ? true : undefined),
    30_000,
    "the broadcast under way",
  );

  const [urgent] = await storeNotifications(database, bus, [
    { user_id: "urgent", category: "security", priority: "transactional", channels: ["in_app"] },
  ]);
  if (!urgent) throw new Error("not stored");
  await publishLane(bus, [urgent]);
  const routedBefore = await eventually(
    async () => {
      const [row] =
        await database.sql`select status from notification_channels where notification_id = ${urgent.notification_id}`;
      return row ? routedRecipients() : undefined;
    },
    30_000,
    "the transactional notification routed",
  );
  t.comment(`transactional routed when ${routedBefore} of ${MEMBERS} broadcast recipients were`);
  t.ok(routedBefore < MEMBERS, "the broadcast had not drained when the transactional one was routed");

  await eventually(
    async () => ((await routedRecipients()) === MEMBERS ? true : undefined),
    90_000,
    "the broadcast to drain",
  );
  const [state] = await database.sql`select status, expanded::int as expanded from broadcasts where id = 'bc'`;
  t.match(state, { status: "expanded", expanded: MEMBERS });
});
