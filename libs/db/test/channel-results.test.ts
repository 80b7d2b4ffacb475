import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import {
  applyPendingReceipts,
  listPendingChannels,
  moveStatus,
  recordReceipts,
  recordRoutedChannels,
  releaseDeferrals,
} from "../src/index.js";

const { database } = await freshDatabase(t);
const { sql } = database;

async function notification(userId = "u1"): Promise<string> {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'c', ${userId}, 'promo', 'welcome', 'promotional', ${sql.json({})}, ${id}, 'h', 0)`;
  return id;
}

const channelRow = async (id: string, channel = "email") =>
  (
    await sql<{ status: string; reason: string | null }[]>`
    select status, reason from notification_channels where notification_id = ${id} and channel = ${channel}`
  )[0];

const events = async (id: string) =>
  (
    await sql<{ status: string }[]>`select status from channel_status_events where notification_id = ${id} order by id`
  ).map((e) => e.status);

t.test("routing records channels once; a rerun finds them and writes nothing", async (t) => {
  const id = await notification();
  const deferredUntil = new Date(Date.now() + 3_600_000);
  const routing = {
    notificationId: id,
    userId: "u1",
    channels: [
      { channel: "email" as const, status: "pending" as const, reason: null, nextAttemptAt: null },
      { channel: "sms" as const, status: "deferred" as const, reason: "quiet_hours", nextAttemptAt: deferredUntil },
    ],
    deferredUntil,
    cap: null,
  };
  t.same(await recordRoutedChannels(database, routing), { first: true, capped: false });
  t.same(
    await recordRoutedChannels(database, {
      ...routing,
      channels: [{ channel: "push", status: "pending", reason: null, nextAttemptAt: null }],
    }),
    { first: false, capped: false },
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
      userId: "capped",
      channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
      deferredUntil: null,
      cap: { userId: "capped", day, cap: 1 },
    });
    return { id, outcome };
  };
  const first = await routed();
  t.same(first.outcome, { first: true, capped: false });
  t.same(await channelRow(first.id), { status: "pending", reason: null });
  const second = await routed();
  t.same(second.outcome, { first: true, capped: true });
  t.same(await channelRow(second.id), { status: "suppressed", reason: "rate_cap" });
  const [count] = await sql<{ count: number }[]>`
    select count from promotional_daily_counts where user_id = 'capped' and day = ${day}`;
  t.equal(count?.count, 1, "a capped routing takes no slot");
});

t.test("a status moves forward only, and a refused move logs no event", async (t) => {
  const id = await notification();
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  const ref = { notification_id: id, channel: "email" as const };
  t.ok(await moveStatus(sql, ref, "delivered", { provider: "smtp", providerId: "p1", attempts: 1 }));
  t.notOk(await moveStatus(sql, ref, "retrying", { reason: "late" }), "delivered never goes back to retrying");
  t.same(await channelRow(id), { status: "delivered", reason: null });
  t.same(await events(id), ["delivered"]);
});

t.test("a receipt is stored once, kept until its send is recorded, then applied", async (t) => {
  const id = await notification();
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  const receipt = {
    provider: "sendgrid",
    eventId: `e-${id}`,
    providerId: `m-${id}`,
    status: "bounced" as const,
    reason: "bounce",
    payload: {},
  };
  t.same(await recordReceipts(sql, [receipt]), { stored: 1, duplicates: 0, pending: 1 });
  t.same(
    await recordReceipts(sql, [receipt]),
    { stored: 0, duplicates: 1, pending: 0 },
    "a retried post is a duplicate",
  );
  t.equal(await applyPendingReceipts(sql), 0, "not applicable before the send is recorded");
  await moveStatus(sql, { notification_id: id, channel: "email" }, "delivered", {
    provider: "sendgrid",
    providerId: `m-${id}`,
  });
  t.equal(await applyPendingReceipts(sql), 1);
  t.same(await channelRow(id), { status: "bounced", reason: "bounce" });
  t.equal(await applyPendingReceipts(sql), 0, "applied once");
});

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
