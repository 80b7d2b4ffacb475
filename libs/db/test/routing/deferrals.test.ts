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
