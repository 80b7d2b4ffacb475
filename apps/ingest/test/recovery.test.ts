import type { Bus } from "@notify/bus";
import { newId } from "@notify/core";
import { captureLogger, freshBus, freshDatabase, streamCount } from "@notify/testing";
import t from "tap";
import { recoverUnpublished } from "../src/notifications/recover.js";

// The recovery sweep over publish_outbox (invariant 1): a batch row goes only once every one of
// its notifications is on the lane, a batch younger than the grace period is left to the
// request that is still publishing it, and a republish is deduplicated by JetStream.
const { database } = await freshDatabase(t);
const realBus = await freshBus(t);
const { log } = captureLogger("ingest");
const { sql } = database;
const lane = () => streamCount(realBus, realBus.streams.lane("transactional"));

let refuse: ((subject: string) => boolean) | null = null;
const bus: Bus = {
  ...realBus,
  async publish(subject, payload, msgId) {
    if (refuse?.(subject)) throw Object.assign(new Error("no responders"), { name: "NoRespondersError" });
    return realBus.publish(subject, payload, msgId);
  },
};

/** Commits notifications for the given users as one batch in the outbox, as ingest does. */
async function commitBatch(users: string[], ageMs = 60_000): Promise<{ ids: string[]; outboxId: string }> {
  const ids = users.map(() => newId());
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'shop', user_id, 'orders', 'welcome', 'transactional', '{}', id, 'h', 0
    from unnest(${ids}::text[], ${users}::text[]) as x(id, user_id)`;
  const [row] = await sql<{ id: string }[]>`
    insert into publish_outbox (notification_ids, created_at)
    values (${ids}::text[], now() - ${`${ageMs} milliseconds`}::interval) returning id::text`;
  return { ids, outboxId: row?.id as string };
}
const outboxRows = async () =>
  (await sql<{ id: string }[]>`select id::text from publish_outbox order by id`).map((r) => r.id);
const sweep = (graceMs = 5000, maxIds?: number) => recoverUnpublished({ database, bus, log }, graceMs, maxIds);
const listed = async (outboxId: string) =>
  (await sql<{ ids: string[] }[]>`select notification_ids as ids from publish_outbox where id = ${outboxId}::bigint`)[0]
    ?.ids;

t.beforeEach(async () => {
  refuse = null;
  await sql`delete from publish_outbox`;
});

t.test("publishes every row of a stale batch once and deletes the batch", async (t) => {
  const before = await lane();
  const { ids } = await commitBatch(["u1", "u2", "u3"]);
  t.equal(await sweep(), 3);
  t.equal(await lane(), before + 3, "three lane messages");
  t.same(await outboxRows(), [], "the batch is settled");

  // A sweep that republishes (its delete was lost, say) is deduplicated by msg id.
  await sql`insert into publish_outbox (notification_ids, created_at) values (${ids}::text[], now() - interval '1 minute')`;
  t.equal(await sweep(), 3);
  t.equal(await lane(), before + 3, "no duplicates on the lane");
});

t.test("rows deleted since the batch was committed are skipped", async (t) => {
  const before = await lane();
  const { ids } = await commitBatch(["u1", "u2"]);
  await sql`delete from notifications where id = ${ids[0] as string}`;
  t.equal(await sweep(), 1);
  t.equal(await lane(), before + 1);
  t.same(await outboxRows(), []);
});

t.test("a batch inside the grace period is left to the request publishing it", async (t) => {
  const { outboxId } = await commitBatch(["u1"], 0);
  t.equal(await sweep(60_000), 0);
  t.same(await outboxRows(), [outboxId]);
});

t.test("a failed publish keeps only that notification listed; the next sweep settles it", async (t) => {
  const before = await lane();
  await commitBatch(["u1"]);
  const bad = await commitBatch(["u2", "u3"]);
  let calls = 0;
  refuse = () => ++calls === 2;
  t.equal(await sweep(), 2, "two of the three published");
  t.same(await outboxRows(), [bad.outboxId], "only the batch with the failure is kept");
  t.same(await listed(bad.outboxId), [bad.ids[0]], "listing only the notification still to publish");
  refuse = null;
  t.equal(await sweep(), 1, "the next sweep publishes just that one");
  t.equal(await lane(), before + 3);
  t.same(await outboxRows(), []);
});

t.test("a large batch is swept a bounded number of notifications at a time", async (t) => {
  const before = await lane();
  const big = await commitBatch(["u1", "u2", "u3", "u4", "u5"]);
  t.equal(await sweep(5000, 2), 2);
  t.same(await listed(big.outboxId), big.ids.slice(2), "the rest stays listed");
  t.equal(await sweep(5000, 2), 2);
  t.equal(await sweep(5000, 2), 1);
  t.same(await outboxRows(), []);
  t.equal(await lane(), before + 5, "each published once");
});

t.test("nothing is attempted while NATS is down", async (t) => {
  const { outboxId } = await commitBatch(["u1"]);
  const down: Bus = { ...bus, isConnected: () => false };
  t.equal(await recoverUnpublished({ database, bus: down, log }, 0), 0);
  t.same(await outboxRows(), [outboxId]);
});
