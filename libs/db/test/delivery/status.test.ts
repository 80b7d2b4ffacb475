import { freshDatabase } from "@notify/testing";
import t from "tap";
import { moveStatus } from "../../src/delivery/status.js";
import { channelRowOf, insertNotification } from "../support.js";

const { database } = await freshDatabase(t);
const { sql } = database;

const notification = (userId?: string) => insertNotification(sql, userId);

const channelRow = (id: string, channel?: string) => channelRowOf(sql, id, channel);

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
