import { setTimeout as sleep } from "node:timers/promises";
import { type LaneMessage, partitionOf } from "@notify/core";
import { captureLogger, freshBus, freshDatabase, streamCount } from "@notify/testing";
import t from "tap";
import { expandBatch, expandBroadcasts } from "../src/broadcasts/expander.js";

// The expander in process: batches in member order, one notification and one lane message per
// member, a cancel that stops it between batches, and two expanders that never share a batch.
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const { log } = captureLogger("processor");
const deps = { database, bus, log };

async function broadcast(id: string, members: number, channels: string[] | null = null) {
  await database.sql`insert into audiences (id, name) values (${id}, ${id})`;
  await database.sql`insert into audience_members (audience_id, user_id)
    select ${id}, ${`${id}-u`} || lpad(n::text, 6, '0') from generate_series(1, ${members}) n`;
  await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
      template_version, requested_channels, data, status, total)
    values (${id}, 'shop', ${id}, 'h', ${id}, 'deals', 'promo', 1, ${channels}::text[], '{"name":"you"}', 'expanding', ${members})`;
}

const recipients = async (id: string) =>
  database.sql<{ user_id: string; notification_id: string; published: boolean; dedup_key: string }[]>`
    select r.user_id, r.notification_id, not exists (select 1 from publish_outbox o where n.id = any(o.notification_ids)) as published, n.dedup_key
    from broadcast_recipients r join notifications n on n.id = r.notification_id
    where r.broadcast_id = ${id} order by r.user_id`;

const state = async (id: string) =>
  (
    await database.sql<{ status: string; expanded: number; cursor: string | null }[]>`
    select status, expanded::int as expanded, cursor from broadcasts where id = ${id}`
  )[0];

t.test("expands in batches into published promotional notifications, then finishes", async (t) => {
  await broadcast("b1", 25, ["email"]);
  t.match(await expandBatch(deps, 10), { kind: "expanded", count: 10 });
  t.match(await state("b1"), { status: "expanding", expanded: 10, cursor: "b1-u000010" });
  t.match(await expandBatch(deps, 10), { kind: "expanded", count: 10 });
  t.match(await expandBatch(deps, 10), { kind: "expanded", count: 5 });
  t.match(await expandBatch(deps, 10), { kind: "finished", broadcastId: "b1" });
  t.match(await expandBatch(deps, 10), { kind: "idle" });
  t.match(await state("b1"), { status: "expanded", expanded: 25 });

  const rows = await recipients("b1");
  t.equal(rows.length, 25);
  t.equal(new Set(rows.map((r) => r.notification_id)).size, 25, "each its own notification id");
  t.ok(rows.every((r) => r.published));
  t.equal(rows[0]?.dedup_key, "broadcast:b1:b1-u000001");
  t.equal(await streamCount(bus, bus.streams.lane("promotional")), 25);
  t.equal(await streamCount(bus, bus.streams.lane("transactional")), 0);
  const first = rows[0] as { user_id: string; notification_id: string };
  const message = await bus.jsm.streams.getMessage(bus.streams.lane("promotional"), {
    last_by_subj: bus.subjects.lane("promotional", partitionOf(first.user_id, bus.naming.partitions)),
  });
  t.match(message?.json<LaneMessage>(), {
    client_id: "shop",
    category: "deals",
    template_id: "promo",
    template_version: 1,
    priority: "promotional",
    channels: ["email"],
    data: { name: "you" },
  });
});

t.test("a cancelled broadcast stops between batches", async (t) => {
  await broadcast("b2", 30);
  await expandBatch(deps, 10);
  await database.sql`update broadcasts set status = 'cancelled' where id = 'b2'`;
  t.match(await expandBatch(deps, 10), { kind: "idle" });
  t.equal((await recipients("b2")).length, 10);
});

t.test("concurrent expanders never give a member two notifications", async (t) => {
  await broadcast("b3", 500);
  await broadcast("b4", 300);
  const run = async () => {
    for (;;) if ((await expandBatch(deps, 37)).kind === "idle") return;
  };
  await Promise.all([run(), run(), run()]);
  for (const [id, n] of [
    ["b3", 500],
    ["b4", 300],
  ] as const) {
    const rows = await recipients(id);
    t.equal(rows.length, n);
    t.equal(new Set(rows.map((r) => r.user_id)).size, n);
    t.match(await state(id), { status: "expanded", expanded: n });
  }
});

t.test("a batch whose publishes fail stays in the outbox for ingest's recovery sweep", async (t) => {
  await broadcast("b-fail", 4, ["email"]);
  const before = await streamCount(bus, bus.streams.lane("promotional"));
  const failing = {
    ...deps,
    bus: { ...bus, publish: async () => Promise.reject(Object.assign(new Error("no ack"), { name: "TimeoutError" })) },
  };
  t.match(await expandBatch(failing, 10), { kind: "expanded", count: 4 });
  const rows = await recipients("b-fail");
  t.equal(rows.length, 4, "the notifications are committed");
  t.ok(
    rows.every((r) => !r.published),
    "and all listed in the outbox",
  );
  t.equal(await streamCount(bus, bus.streams.lane("promotional")), before, "nothing reached the lane");
  // Out of the way of the tests below.
  await database.sql`update broadcasts set status = 'cancelled' where id = 'b-fail'`;
});

t.test("pipelined expansion: every member once, finish reported after its publishes, no outbox row left", async (t) => {
  await broadcast("p1", 95, ["email"]);
  await broadcast("p2", 40, ["email"]);
  const before = await streamCount(bus, bus.streams.lane("promotional"));
  // When a broadcast is reported finished, all its lane messages are acknowledged, and none of
  // the next broadcast's is sent yet.
  let acked = 0;
  const counting = {
    ...deps,
    bus: {
      ...bus,
      publish: (async (...args: Parameters<typeof bus.publish>) => {
        const ack = await bus.publish(...args);
        // Acks slower than the next batch's transaction, so that the order is what is tested.
        await sleep(50);
        acked++;
        return ack;
      }) as typeof bus.publish,
    },
  };
  const finished: { id: string; acked: number }[] = [];
  const count = await expandBroadcasts(counting, 10, { onFinished: (id) => finished.push({ id, acked }) });
  t.equal(count, 135);
  t.same(finished, [
    { id: "p1", acked: 95 },
    { id: "p2", acked: 135 },
  ]);
  for (const [id, n] of [
    ["p1", 95],
    ["p2", 40],
  ] as const) {
    const rows = await recipients(id);
    t.equal(new Set(rows.map((r) => r.user_id)).size, n, `${id}: each member once`);
    t.ok(
      rows.every((r) => r.published),
      `${id}: every batch settled`,
    );
    t.match(await state(id), { status: "expanded", expanded: n });
  }
  t.equal(await streamCount(bus, bus.streams.lane("promotional")), before + 135);
  const message = (
    await bus.jsm.streams.getMessage(bus.streams.lane("promotional"), {
      last_by_subj: bus.subjects.lane("promotional", partitionOf("p2-u000001", bus.naming.partitions)),
    })
  )?.json<LaneMessage>();
  const stamps = await database.sql<{ created_at: Date }[]>`
    select created_at from notifications where id = ${message?.notification_id ?? ""}`;
  t.equal(message?.created_at, stamps[0]?.created_at.toISOString(), "the message carries the stored created_at");
});

t.test("pipelined expansion keeps two batches publishing while the next is written", async (t) => {
  await broadcast("d1", 80, ["email"]);
  let inFlight = 0;
  let most = 0;
  const slow = {
    ...deps,
    bus: {
      ...bus,
      // Acks slower than a transaction: with one batch publishing at a time, nats-server would
      // wait for the expander between batches.
      publish: (async (...args: Parameters<typeof bus.publish>) => {
        most = Math.max(most, ++inFlight);
        try {
          await sleep(40);
          return await bus.publish(...args);
        } finally {
          inFlight--;
        }
      }) as typeof bus.publish,
    },
  };
  t.equal(await expandBroadcasts(slow, 10), 80);
  t.equal(most, 20, "two batches' publishes in flight at once, never three");
  t.ok(
    (await recipients("d1")).every((r) => r.published),
    "every batch's outbox row deleted",
  );
  t.match(await state("d1"), { status: "expanded", expanded: 80 });
  most = 0;
  await broadcast("d2", 30, ["email"]);
  t.equal(await expandBroadcasts(slow, 10, { publishing: 1 }), 30);
  t.equal(most, 10, "publishing: 1 publishes one batch at a time, as before");
});

t.test("pipelined expansion stops between batches and keeps a failed batch for the recovery sweep", async (t) => {
  await broadcast("p3", 50, ["email"]);
  let batches = 0;
  let publishes = 0;
  const flaky = {
    ...deps,
    bus: {
      ...bus,
      // The second batch's publishes fail; the others go through.
      publish: (async (...args: Parameters<typeof bus.publish>) => {
        const batch = Math.floor(publishes++ / 10);
        if (batch === 1) throw Object.assign(new Error("no ack"), { name: "TimeoutError" });
        return bus.publish(...args);
      }) as typeof bus.publish,
    },
  };
  const count = await expandBroadcasts(flaky, 10, { isStopping: () => ++batches > 3 });
  t.equal(count, 30, "three batches, then it stopped");
  t.match(await state("p3"), { status: "expanding", expanded: 30 });
  const rows = await recipients("p3");
  t.equal(rows.length, 30);
  t.same(
    rows.filter((r) => !r.published).map((r) => r.user_id),
    Array.from({ length: 10 }, (_, i) => `p3-u${String(11 + i).padStart(6, "0")}`),
    "only the failed batch is left in the outbox",
  );
  await database.sql`delete from publish_outbox`;
  await database.sql`update broadcasts set status = 'cancelled' where id = 'p3'`;
});

t.test("pipelined expanders side by side never give a member two notifications", async (t) => {
  await broadcast("c1", 500);
  await broadcast("c2", 300);
  const counts = await Promise.all([
    expandBroadcasts(deps, 37),
    expandBroadcasts(deps, 37),
    expandBroadcasts(deps, 41),
  ]);
  t.equal(
    counts.reduce((a, b) => a + b, 0),
    800,
  );
  for (const [id, n] of [
    ["c1", 500],
    ["c2", 300],
  ] as const) {
    const rows = await recipients(id);
    t.equal(new Set(rows.map((r) => r.user_id)).size, n);
    t.equal(rows.length, n);
    t.ok(
      rows.every((r) => r.published),
      `${id}: every batch settled`,
    );
  }
});

t.test("a database failure mid-expansion still settles the batch that was publishing", async (t) => {
  await broadcast("f1", 50, ["email"]);
  let transactions = 0;
  // The third transaction fails: batches one and two are committed, two is publishing then.
  const sql = new Proxy(database.sql, {
    get: (target, prop, receiver) =>
      prop === "begin"
        ? (...args: unknown[]) => {
            if (++transactions === 3) return Promise.reject(new Error("connection lost"));
            return (target.begin as (...a: unknown[]) => unknown)(...args);
          }
        : Reflect.get(target, prop, receiver),
  });
  await t.rejects(expandBroadcasts({ ...deps, database: { ...database, sql } }, 10), /connection lost/);
  t.match(await state("f1"), { status: "expanding", expanded: 20 });
  const rows = await recipients("f1");
  t.equal(rows.length, 20);
  t.ok(
    rows.every((r) => r.published),
    "both committed batches were published and their outbox rows deleted",
  );
  t.equal(await expandBroadcasts(deps, 10), 30, "a later run picks up after the cursor");
  t.equal(new Set((await recipients("f1")).map((r) => r.user_id)).size, 50);
});

t.test("a template's time to live gives every recipient the broadcast's deadline", async (t) => {
  await database.sql`insert into templates (id, latest_version) values ('flash', 1)`;
  await database.sql`insert into template_versions (template_id, version, params, ttl_seconds) values ('flash', 1, '[]', 600)`;
  await database.sql`insert into audiences (id, name) values ('ttl', 'ttl')`;
  await database.sql`insert into audience_members (audience_id, user_id) values ('ttl', 'ttl-u1'), ('ttl', 'ttl-u2')`;
  await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
      template_version, requested_channels, data, status, total, created_at)
    values ('ttl', 'shop', 'ttl', 'h', 'ttl', 'deals', 'flash', 1, null, '{}', 'expanding', 2, '2026-11-25T10:00:00Z')`;
  t.match(await expandBatch(deps, 10), { kind: "expanded", count: 2 });
  const deadlines = await database.sql<{ deliver_by: Date }[]>`
    select n.deliver_by from broadcast_recipients r join notifications n on n.id = r.notification_id
    where r.broadcast_id = 'ttl'`;
  t.same(
    deadlines.map((d) => d.deliver_by.toISOString()),
    ["2026-11-25T10:10:00.000Z", "2026-11-25T10:10:00.000Z"],
    "600 s after the broadcast was accepted",
  );
  const messages: LaneMessage[] = [];
  const info = await bus.jsm.streams.info(bus.streams.lane("promotional"));
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const message = (
      await bus.jsm.streams.getMessage(bus.streams.lane("promotional"), { seq }).catch(() => null)
    )?.json<LaneMessage>();
    if (message?.template_id === "flash") messages.push(message);
  }
  t.same(
    messages.map((m) => m.deliver_by),
    ["2026-11-25T10:10:00.000Z", "2026-11-25T10:10:00.000Z"],
    "and their lane messages carry it",
  );
});
