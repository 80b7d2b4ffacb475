import { type Bus, connectBus } from "@notify/bus";
import type { LaneMessage } from "@notify/core";
import { eventually, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import type { ProcessorDeps } from "../src/consumers.js";
import { type LeasedPartitions, SINGLETON, startLeasedPartitions } from "../src/partitions.js";
import { every } from "../src/periodic.js";
import { processorFixture, publishLane, seedUser, storeNotifications, workItems } from "./helpers.js";

// Several processor instances share the lane partitions through notify_leases. While
// notifications flow, a second instance joins, the first leaves, a third joins and is then cut
// off from NATS as a crash would: every notification is routed, and each user's in the order
// they were published, across every handover.
const PARTITIONS = 4;
const PER_USER = 40;
const users = Array.from({ length: 8 }, (_, i) => `rebalance-${i}`);
const { database, bus, deps } = await processorFixture(t, { partitions: PARTITIONS });
deps.partitionConcurrency = 8;
deps.now = () => new Date();
for (const user of users) await seedUser(database, user);

async function instance(id: string): Promise<{ partitions: LeasedPartitions; bus: Bus }> {
  const own = await connectBus({
    servers: TEST_NATS_URL,
    name: `processor-${id}`,
    namespace: bus.naming.namespace,
    partitions: PARTITIONS,
  });
  const ownDeps: ProcessorDeps = { ...deps, bus: own, log: deps.log.child({ instance: id }) };
  const partitions = await startLeasedPartitions(ownDeps, { id, tickMs: 200, ttlMs: 9000 });
  return { partitions, bus: own };
}
const partitionsOf = (i: { partitions: LeasedPartitions }) => i.partitions.leases.held().filter((n) => n !== SINGLETON);

t.test("order and completeness hold while instances join, leave and crash", async (t) => {
  const messages = await storeNotifications(
    database,
    bus,
    Array.from({ length: PER_USER * users.length }, (_, i) => ({
      user_id: users[i % users.length] as string,
      priority: i % 4 === 0 ? ("transactional" as const) : ("promotional" as const),
      channels: ["email" as const],
      data: { name: `#${Math.floor(i / users.length)}` },
    })),
  );
  const phase = (n: number) => messages.slice((n * messages.length) / 5, ((n + 1) * messages.length) / 5);
  const publish = (n: number) => publishLane(bus, phase(n), 32);

  const a = await instance("a");
  await publish(0);
  await eventually(async () => (partitionsOf(a).length === 2 * PARTITIONS ? true : undefined), 10_000, "a alone");

  const b = await instance("b");
  await publish(1);
  await eventually(async () => (partitionsOf(b).length > 0 ? true : undefined), 10_000, "b takes a share");
  t.ok(partitionsOf(a).length < 2 * PARTITIONS, "a gave some up");

  await a.partitions.stop();
  await a.bus.close();
  await publish(2);
  await eventually(async () => (partitionsOf(b).length === 2 * PARTITIONS ? true : undefined), 10_000, "b has all");

  const c = await instance("c");
  await eventually(async () => (partitionsOf(c).length > 0 ? true : undefined), 10_000, "c takes a share");
  t.equal(
    [b, c].filter((i) => i.partitions.leases.holds(SINGLETON)).length,
    1,
    "one instance of two runs the periodic jobs",
  );
  await publish(3);
  // c is cut off mid-flow: whatever it held unacknowledged comes back to b, first.
  await c.bus.nc.close();
  await publish(4);
  await eventually(async () => (partitionsOf(b).length === 2 * PARTITIONS ? true : undefined), 30_000, "b takes c's");
  t.equal(partitionsOf(c).length, 0, "c, cut off, stopped consuming");
  await eventually(async () => (b.partitions.leases.holds(SINGLETON) ? true : undefined), 15_000, "b leads");
  t.notOk(c.partitions.leases.holds(SINGLETON), "the periodic jobs run on b alone");
  t.teardown(async () => {
    await c.partitions.stop().catch(() => {});
    await b.partitions.stop();
    await b.bus.close();
  });

  const items = await eventually(
    async () => {
      const all = await workItems(bus);
      return all.length === messages.length ? all : undefined;
    },
    60_000,
    "every message routed",
  );
  t.equal(new Set(items.map((w) => w.item.notification_id)).size, messages.length, "each routed once");
  for (const lane of ["transactional", "promotional"] as const) {
    for (const user of users) {
      const published = messages
        .filter((m: LaneMessage) => m.user_id === user && m.priority === lane)
        .map((m) => m.notification_id);
      const routed = items
        .filter((w) => w.item.user_id === user && w.item.priority === lane)
        .map((w) => w.item.notification_id);
      t.same(routed, published, `${user}, ${lane}: routed in publish order`);
    }
  }
});

t.test("a periodic job runs only while its instance leads", async (t) => {
  let leading = false;
  let rounds = 0;
  const job = every(
    20,
    deps.log,
    "counting",
    async () => {
      rounds++;
    },
    () => leading,
  );
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(rounds, 0, "no round while another instance leads");
  leading = true;
  await eventually(async () => (rounds >= 3 ? true : undefined), 5000, "rounds once leading");
  await job.stop();
});
