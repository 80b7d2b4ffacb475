import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { moveStatus } from "../../src/delivery/status.js";

const { database } = await freshDatabase(t);
const { sql } = database;

async function notification(userId = "u1"): Promise<string> {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    values (${id}, 'c', ${userId}, 'promo', 'welcome', 'promotional', ${sql.json({})}, ${id}, 'h', 0, ${new Date()})`;
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

t.test("a status moves forward only, and a refused move logs no event", async (t) => {
  const id = await notification();
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  const ref = { notification_id: id, channel: "email" as const };
  t.ok(await moveStatus(sql, ref, "delivered", { provider: "smtp", providerId: "p1", attempts: 1 }));
  t.notOk(await moveStatus(sql, ref, "retrying", { reason: "late" }), "delivered never goes back to retrying");
  t.same(await channelRow(id), { status: "delivered", reason: null });
  t.same(await events(id), ["delivered"]);
});
