import { freshDatabase } from "@notify/testing";
import t from "tap";
import { releaseDeferrals } from "../../src/routing/deferrals.js";
import { channelRowOf, insertNotification } from "../support.js";

const { database } = await freshDatabase(t);
const { sql } = database;

const notification = (userId?: string) => insertNotification(sql, userId);

const channelRow = (id: string, channel?: string) => channelRowOf(sql, id, channel);

t.test("a release holds its due rows: a concurrent release gets none of them", async (t) => {
  const id = await notification();
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'deferred')`;
  await sql`insert into deferred_notifications (notification_id, user_id, due_at) values (${id}, 'u1', now() - interval '1 minute')`;
  const now = new Date();
  const outer = await releaseDeferrals(database, [id], now, async (ops) => {
    const inner = await releaseDeferrals(database, [id], now, async () => "second");
    t.equal(inner, null, "the row is locked by the first release");
    t.ok(ops.locked.has(id));
    t.ok(ops.isDeferred(id, "email"));
    await ops.settleChannels([
      { notificationId: id, channel: "email", status: "suppressed", reason: "opted_out", nextAttemptAt: null },
    ]);
    await ops.finish([id]);
    return "first";
  });
  t.equal(outer, "first");
  t.same(await channelRow(id), { status: "suppressed", reason: "opted_out" });
  t.equal((await sql`select 1 from deferred_notifications where notification_id = ${id}`).length, 0);
});

t.test("releases taking the daily cap of the same users in crossed orders do not deadlock", async (t) => {
  // Two processors release two batches at once, each holding notifications of users x and y
  // and taking their cap slots in its own order (due order): x then y, and y then x. Each
  // takes its first slot, then waits (up to a bound) for the other to have taken its first:
  // with the counters locked as taken, each would then wait for the row the other holds.
  const deferred = async (userId: string) => {
    const id = await notification(userId);
    await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'deferred')`;
    await sql`insert into deferred_notifications (notification_id, user_id, due_at) values (${id}, ${userId}, now() - interval '1 minute')`;
    return id;
  };
  const [x, y] = [`cap-x-${Date.now()}`, `cap-y-${Date.now()}`];
  const batches = [
    { ids: [await deferred(x), await deferred(y)], users: [x, y] },
    { ids: [await deferred(y), await deferred(x)], users: [y, x] },
  ];
  const day = "2026-12-01";
  let firstTaken = 0;
  let bothTook: () => void = () => {};
  const both = new Promise<void>((resolve) => {
    bothTook = resolve;
  });
  const released = await Promise.allSettled(
    batches.map(({ ids, users }) =>
      releaseDeferrals(database, ids, new Date(), async (ops) => {
        const [first, second] = users as [string, string];
        const granted = [await ops.takeCapSlot({ userId: first, day, cap: 10 })];
        if (++firstTaken === 2) bothTook();
        await Promise.race([both, new Promise((resolve) => setTimeout(resolve, 500))]);
        granted.push(await ops.takeCapSlot({ userId: second, day, cap: 10 }));
        await ops.finish([...ops.locked]);
        return granted;
      }),
    ),
  );
  const failed = released.flatMap((r) => (r.status === "rejected" ? [String((r.reason as Error).message)] : []));
  t.same(failed, [], "neither release failed (no deadlock detected)");
  t.same(
    released.map((r) => (r.status === "fulfilled" ? r.value : null)),
    [
      [true, true],
      [true, true],
    ],
    "each release took both its slots",
  );
  const counts = await sql<{ user_id: string; count: number }[]>`
    select user_id, count from promotional_daily_counts where user_id in (${x}, ${y}) order by user_id`;
  t.same(
    counts.map((c) => [c.user_id, c.count]),
    [
      [x, 2],
      [y, 2],
    ],
    "each user's counter counts both releases",
  );
});
