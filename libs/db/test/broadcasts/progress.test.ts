import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { createDb, listBroadcastProgress, readBroadcastProgress } from "../../src/index.js";

// A broadcast's outcome counts read every recipient's channels (seconds for a million), so a
// count is kept and made again once it is ten times as old as it took; one process counts a
// broadcast at a time. Against the real PostgreSQL.
const { database, url } = await freshDatabase(t);
const { sql } = database;
await sql`insert into audiences (id, name) values ('aud', 'everyone')`;

/** A broadcast whose recipients have these email outcomes. */
async function broadcast(outcomes: string[]): Promise<string> {
  const id = randomUUID();
  await sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id, data, status, total, expanded)
    values (${id}, 'shop', ${id}, 'h', 'aud', 'deals', 'promo', '{}', 'expanded', ${outcomes.length}, ${outcomes.length})`;
  for (const [i, status] of outcomes.entries()) {
    const nid = randomUUID();
    await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
      values (${nid}, 'shop', ${`u-${i}`}, 'deals', 'promo', 'promotional', '{}', ${nid}, 'h', 0)`;
    await sql`insert into broadcast_recipients values (${id}, ${`u-${i}`}, ${nid})`;
    await sql`insert into notification_channels (notification_id, channel, status) values (${nid}, 'email', ${status})`;
  }
  return id;
}

/** As if counting this broadcast had taken `ms`. */
const tookMs = (id: string, ms: number) =>
  sql`update broadcast_progress set count_ms = ${ms} where broadcast_id = ${id}`;
/**
 * A read that waits for a new count as long as it takes: a loaded machine may take longer than
 * the second a read with a stale count waits before answering with it.
 */
const readWaiting = (id: string) => readBroadcastProgress(database, id, { waitMs: 60_000 });
const deliverAll = (id: string) =>
  sql`update notification_channels set status = 'delivered'
    where notification_id in (select notification_id from broadcast_recipients where broadcast_id = ${id})`;

t.test("a count is kept while younger than ten times what it took, then made again", async (t) => {
  const id = await broadcast(["delivered", "failed", "pending"]);
  const first = await readBroadcastProgress(database, id);
  t.match(first, { delivered: 1, failed: 1, suppressed: 0, expanded: 3 });
  t.ok(first?.counted_at, "when it was counted");

  await deliverAll(id);
  await tookMs(id, 60_000);
  const kept = await readBroadcastProgress(database, id);
  t.match(kept, { delivered: 1, failed: 1 }, "the kept count, while it is fresh");
  t.equal(kept?.counted_at, first?.counted_at);

  await sql`update broadcasts set status = 'cancelled' where id = ${id}`;
  t.equal((await readBroadcastProgress(database, id))?.status, "cancelled", "the row itself is always current");

  await tookMs(id, 0);
  const again = await readWaiting(id);
  t.match(again, { delivered: 3, failed: 0 }, "counted again once it is stale");
  t.ok(Date.parse(again?.counted_at ?? "") > Date.parse(first?.counted_at ?? ""), "a later count");
});

t.test("a small broadcast is counted afresh on every read", async (t) => {
  const id = await broadcast(["pending", "pending"]);
  t.match(await readBroadcastProgress(database, id), { delivered: 0 });
  await deliverAll(id);
  // Counting two recipients takes a millisecond or so: the count is stale ten of them later.
  await tookMs(id, 0);
  t.match(await readWaiting(id), { delivered: 2 });
});

t.test("while another process counts, a reader with a count answers with it; one without waits", async (t) => {
  const id = await broadcast(["delivered"]);
  const other = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(() => other.end());
  const counting = other.reserve();
  const held = await counting;
  await held`select pg_advisory_lock(7266002, hashtext(${id}))`;

  // Never counted: the read waits for the other's count.
  let answered = false;
  const waiting = readBroadcastProgress(database, id).then((p) => {
    answered = true;
    return p;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.notOk(answered, "waits while the other counts");
  await held`select pg_advisory_unlock(7266002, hashtext(${id}))`;
  t.match(await waiting, { delivered: 1 }, "then counts (the other wrote nothing)");

  await deliverAll(id);
  await sql`update notification_channels set status = 'failed'
    where notification_id in (select notification_id from broadcast_recipients where broadcast_id = ${id})`;
  await tookMs(id, 0);
  await held`select pg_advisory_lock(7266002, hashtext(${id}))`;
  // However long it may wait for a new count, it does not wait for the other's: the lock is
  // released only after the read has answered, so a read that waited would never answer.
  const stale = readWaiting(id);
  const answer = await Promise.race([
    stale,
    new Promise<"waited">((resolve) => setTimeout(() => resolve("waited"), 20_000)),
  ]);
  t.match(answer, { delivered: 1, failed: 0 }, "the last count, without waiting for the other's");
  await held`select pg_advisory_unlock(7266002, hashtext(${id}))`;
  held.release();
  t.match(await readWaiting(id), { delivered: 0, failed: 1 }, "counted once the other is done");
});

t.test("the list counts what was never counted and shows kept counts", async (t) => {
  const fresh = await broadcast(["delivered", "delivered"]);
  const keptId = await broadcast(["failed"]);
  await readBroadcastProgress(database, keptId);
  await tookMs(keptId, 60_000);
  await deliverAll(keptId);
  const { broadcasts, total } = await listBroadcastProgress(database, { offset: 0, limit: 50 });
  t.ok(total >= 2);
  t.match(
    broadcasts.find((b) => b.broadcast_id === fresh),
    { delivered: 2 },
  );
  t.match(
    broadcasts.find((b) => b.broadcast_id === keptId),
    { delivered: 0, failed: 1 },
    "its kept count",
  );
  const rows = await sql`select broadcast_id from broadcast_progress where broadcast_id = ${fresh}`;
  t.equal(rows.length, 1, "the list kept the count it made");
});

t.test("a count is read and kept while the expander holds the broadcast's row", async (t) => {
  // The expander locks its broadcast's row for update while it writes a batch; keeping a count
  // must not wait for it (a foreign key's check would: it takes a share lock on that row).
  const id = await broadcast(["delivered"]);
  const expander = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(() => expander.end());
  const held = await expander.reserve();
  await held`begin`;
  await held`select id from broadcasts where id = ${id} for update`;
  try {
    const read = readBroadcastProgress(database, id);
    const waited = await Promise.race([
      read.then(() => false),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5000)),
    ]);
    t.notOk(waited, "answered while the row is held");
    t.match(await read, { delivered: 1 });
  } finally {
    await held`rollback`;
    held.release();
  }
});

t.test("first readers of a broadcast in one process share one count and one connection", async (t) => {
  const id = await broadcast(["delivered"]);
  const other = await broadcast(["failed"]);
  const holder = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(() => holder.end());
  const held = await holder.reserve();
  // Another process counts `id`: its first readers here wait for that count.
  await held`select pg_advisory_lock(7266002, hashtext(${id}))`;
  try {
    const crowd = Array.from({ length: 12 }, () => readBroadcastProgress(database, id));
    // The pool has four connections: twelve waiting readers holding one each would leave none.
    const elsewhere = await Promise.race([
      readBroadcastProgress(database, other),
      new Promise<null>((resolve) => setTimeout(() => resolve(null), 5000)),
    ]);
    t.match(elsewhere, { failed: 1 }, "another broadcast is read while they wait");
    await held`select pg_advisory_unlock(7266002, hashtext(${id}))`;
    for (const progress of await Promise.all(crowd)) t.match(progress, { delivered: 1 });
  } finally {
    held.release();
  }
});

t.test("a broadcast too large to count within the statement timeout still gets its count", async (t) => {
  // 60,000 recipients take longer to count than the 40 ms the pool's statements may take.
  const id = randomUUID();
  await sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id, data, status, total, expanded)
    values (${id}, 'shop', ${id}, 'h', 'aud', 'deals', 'promo', '{}', 'expanded', 60000, 60000)`;
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select ${id} || '-' || i, 'shop', 'big-' || i, 'deals', 'promo', 'promotional', '{}', ${id} || '-' || i, 'h', 0
    from generate_series(1, 60000) i`;
  await sql`insert into broadcast_recipients select ${id}, 'big-' || i, ${id} || '-' || i from generate_series(1, 60000) i`;
  await sql`insert into notification_channels (notification_id, channel, status)
    select ${id} || '-' || i, 'email', case when i % 3 = 0 then 'failed' else 'delivered' end from generate_series(1, 60000) i`;
  await sql`analyze`;
  const hurried = createDb({ url, max: 2, statementTimeoutMs: 40 });
  t.teardown(() => hurried.close());
  const [slow] = await hurried.sql`select 1 as ok from pg_sleep(0.2)`.catch((error: { code?: string }) => [error]);
  t.match(slow, { code: "57014" }, "the pool's statements are cut at 40 ms");
  t.match(await readBroadcastProgress(hurried, id), { delivered: 40000, failed: 20000 });
});

t.test("a first reader waits for another process's count past the pool's statement timeout", async (t) => {
  const id = await broadcast(["delivered", "failed"]);
  const hurried = createDb({ url, max: 2, statementTimeoutMs: 40 });
  t.teardown(() => hurried.close());
  const other = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(() => other.end());
  const held = await other.reserve();
  await held`select pg_advisory_lock(7266002, hashtext(${id}))`;
  try {
    const waiting = readBroadcastProgress(hurried, id).catch((error: unknown) => error);
    // Longer than the pool's statements may take: the wait is the count's, not the pool's.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await held`select pg_advisory_unlock(7266002, hashtext(${id}))`;
    t.match(await waiting, { delivered: 1, failed: 1 });
  } finally {
    held.release();
  }
});
