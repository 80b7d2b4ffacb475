import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { listPendingChannels, recordRoutedChannels } from "../../src/routing/channels.js";

const { database } = await freshDatabase(t);
const { sql } = database;

async function notification(
  userId = "u1",
  options: { client?: string; priority?: string; createdAt?: Date } = {},
): Promise<string> {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    values (${id}, ${options.client ?? "c"}, ${userId}, 'promo', 'welcome', ${options.priority ?? "promotional"},
            ${sql.json({})}, ${id}, 'h', 0, ${options.createdAt ?? new Date()})`;
  return id;
}

const email = [{ channel: "email" as const, status: "pending" as const, reason: null, nextAttemptAt: null }];
const routingOf = (id: string, userId: string, extra: { cap?: { cap: number; day: string } } = {}) => ({
  notificationId: id,
  clientId: "c",
  userId,
  priority: "promotional",
  channels: email,
  deferredUntil: null,
  cap: extra.cap ? { userId, ...extra.cap } : null,
  order: "hold" as const,
});

const channelRow = async (id: string, channel = "email") =>
  (
    await sql<{ status: string; reason: string | null }[]>`
    select status, reason from notification_channels where notification_id = ${id} and channel = ${channel}`
  )[0];

t.test("routing records channels once; a rerun finds them and writes nothing", async (t) => {
  const id = await notification();
  const deferredUntil = new Date(Date.now() + 3_600_000);
  const routing = {
    notificationId: id,
    clientId: "c",
    userId: "u1",
    priority: "promotional",
    channels: [
      { channel: "email" as const, status: "pending" as const, reason: null, nextAttemptAt: null },
      { channel: "sms" as const, status: "deferred" as const, reason: "quiet_hours", nextAttemptAt: deferredUntil },
    ],
    deferredUntil,
    cap: null,
  };
  t.same(await recordRoutedChannels(database, routing), {
    first: true,
    capped: false,
    throttled: false,
    held: false,
    earlier: null,
  });
  t.same(
    await recordRoutedChannels(database, {
      ...routing,
      channels: [{ channel: "push", status: "pending", reason: null, nextAttemptAt: null }],
    }),
    { first: false, capped: false, throttled: false, held: false, earlier: null },
    "a rerun choosing other channels adds none",
  );
  t.same(await listPendingChannels(database, id), ["email"]);
  const timers = await sql`select 1 from deferred_notifications where notification_id = ${id}`;
  t.equal(timers.length, 1, "the deferral timer is written with the channels");
});

t.test("the cap is taken only by the first run; over it, pending channels are suppressed", async (t) => {
  const day = "2026-01-01";
  const routed = async () => {
    const id = await notification("capped");
    const outcome = await recordRoutedChannels(database, {
      notificationId: id,
      clientId: "c",
      userId: "capped",
      priority: "promotional",
      channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
      deferredUntil: null,
      cap: { userId: "capped", day, cap: 1 },
    });
    return { id, outcome };
  };
  const first = await routed();
  t.same(first.outcome, { first: true, capped: false, throttled: false, held: false, earlier: null });
  t.same(await channelRow(first.id), { status: "pending", reason: null });
  const second = await routed();
  t.same(second.outcome, { first: true, capped: true, throttled: false, held: false, earlier: null });
  t.same(await channelRow(second.id), { status: "suppressed", reason: "rate_cap" });
  const [count] = await sql<{ count: number }[]>`
    select count from promotional_daily_counts where user_id = 'capped' and day = ${day}`;
  t.equal(count?.count, 1, "a capped routing takes no slot");
});

t.test(
  "a routing waits for the user's previous notification in its lane and client, with or without a cap",
  async (t) => {
    const base = Date.now() - 60_000;
    const at = (s: number) => new Date(base + s * 1000);
    for (const cap of [undefined, { cap: 100, day: "2026-02-01" }]) {
      const user = `ordered-${cap ? "capped" : "free"}`;
      const first = await notification(user, { createdAt: at(1) });
      const second = await notification(user, { createdAt: at(2) });
      // Neither of these is the user's predecessor in the lane.
      await notification(user, { createdAt: at(1.5), client: "another-client" });
      await notification(user, { createdAt: at(1.7), priority: "transactional" });
      const label = cap ? "with a cap" : "without a cap";

      t.same(
        await recordRoutedChannels(database, routingOf(second, user, { ...(cap ? { cap } : {}) })),
        { first: false, capped: false, throttled: false, held: true, earlier: first },
        `${label}: held while the previous one is unrouted`,
      );
      t.equal(await channelRow(second), undefined, `${label}: nothing written`);
      t.same(
        await recordRoutedChannels(database, { ...routingOf(second, user), order: "report" as const }),
        { first: true, capped: false, throttled: false, held: false, earlier: first },
        `${label}: routed anyway when not asked to hold, naming the one it passed`,
      );
      const third = await notification(user, { createdAt: at(3) });
      t.same(
        await recordRoutedChannels(database, routingOf(third, user, { ...(cap ? { cap } : {}) })),
        { first: true, capped: false, throttled: false, held: false, earlier: null },
        `${label}: only the one just before counts (it was routed)`,
      );
      t.same(
        await recordRoutedChannels(database, routingOf(first, user, { ...(cap ? { cap } : {}) })),
        { first: true, capped: false, throttled: false, held: false, earlier: null },
        `${label}: the first one has nothing before it`,
      );
    }
  },
);

t.test("without an order check the previous notification is not looked for", async (t) => {
  const before = await notification("unchecked", { createdAt: new Date(Date.now() - 5000) });
  const id = await notification("unchecked");
  const { order: _order, ...unchecked } = routingOf(id, "unchecked");
  t.same(await recordRoutedChannels(database, unchecked), {
    first: true,
    capped: false,
    throttled: false,
    held: false,
    earlier: null,
  });
  t.equal(await channelRow(before), undefined, "the previous one is still unrouted");
});

t.test("the previous notification is found past the user's others, but not beyond an hour", async (t) => {
  const base = Date.now() - 60_000;
  const previous = await notification("busy", { createdAt: new Date(base) });
  for (let i = 1; i <= 12; i++) {
    await notification("busy", { createdAt: new Date(base + i * 100), priority: "transactional" });
    await notification("busy", { createdAt: new Date(base + i * 100 + 50), client: "another-client" });
  }
  const id = await notification("busy", { createdAt: new Date(base + 5000) });
  t.same(
    await recordRoutedChannels(database, routingOf(id, "busy")),
    { first: false, capped: false, throttled: false, held: true, earlier: previous },
    "24 notifications of another lane and another client in between",
  );
  const old = await notification("returning", { createdAt: new Date(Date.now() - 2 * 3_600_000) });
  const now = await notification("returning");
  const outcome = await recordRoutedChannels(database, routingOf(now, "returning"));
  t.same(
    outcome,
    { first: true, capped: false, throttled: false, held: false, earlier: null },
    "two hours before: not waited for",
  );
  t.equal(await channelRow(old), undefined, "(that one is the reconciler's)");
});

t.test("notifications created at the same time are all the next one's predecessors", async (t) => {
  const created = new Date(Date.now() - 30_000);
  const a = await notification("siblings", { createdAt: created });
  const b = await notification("siblings", { createdAt: created });
  const later = await notification("siblings", { createdAt: new Date(created.getTime() + 1000) });
  t.same(
    (await recordRoutedChannels(database, routingOf(a, "siblings"))).first,
    true,
    "siblings do not wait for each other",
  );
  const outcome = await recordRoutedChannels(database, routingOf(later, "siblings"));
  t.same(
    outcome,
    { first: false, capped: false, throttled: false, held: true, earlier: b },
    "held by the sibling still unrouted",
  );
  t.same((await recordRoutedChannels(database, routingOf(b, "siblings"))).first, true);
  t.same((await recordRoutedChannels(database, routingOf(later, "siblings"))).first, true);
});

t.test("a rerun of a routed notification is a rerun, not held", async (t) => {
  const before = await notification("rerun", { createdAt: new Date(Date.now() - 5000) });
  const id = await notification("rerun");
  await recordRoutedChannels(database, { ...routingOf(id, "rerun"), order: "report" as const });
  t.same(await recordRoutedChannels(database, routingOf(id, "rerun")), {
    first: false,
    capped: false,
    throttled: false,
    held: false,
    earlier: before,
  });
});
