import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { recordReceipts } from "../../src/index.js";
import { someoneWaitsForALock } from "../support.js";

// A receipt names its send by provider id. When the channel it names is locked by another writer
// that gives the channel another send's id (a replay, a retry through another provider), the
// receipt waits for the lock and must then leave the channel alone: it is about a send the
// channel no longer records.

const { url, database } = await freshDatabase(t);
const { sql } = database;
const other = postgres(url, { max: 1, onnotice: () => {} });
t.teardown(() => other.end());

t.test("a receipt waiting for a channel whose send id changes meanwhile leaves it alone", async (t) => {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'c', 'u', 'promo', 'welcome', 'promotional', '{}', ${id}, 'h', 0)`;
  await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
    values (${id}, 'email', 'delivered', 'sendgrid', 'old-send')`;

  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked = () => {};
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  // Another writer gives the channel a new send's id and holds the row until told.
  const writer = other.begin(async (tx) => {
    await tx`update notification_channels set provider_id = 'new-send' where notification_id = ${id}`;
    locked();
    await held;
  });
  await isLocked;
  const receipt = recordReceipts(sql, [
    {
      provider: "sendgrid",
      eventId: `bounce-${id}`,
      providerId: "old-send",
      status: "bounced",
      reason: "bounce",
      payload: {},
    },
  ]);
  // The receipt's statement waits for the row's lock.
  t.ok(await someoneWaitsForALock(sql), "the receipt waited for the row");
  release();
  await writer;
  await receipt;
  const [row] = await sql<{ status: string; provider_id: string }[]>`
    select status, provider_id from notification_channels where notification_id = ${id}`;
  t.same(row, { status: "delivered", provider_id: "new-send" }, "the old send's bounce moved nothing");
  const events = await sql`select 1 from channel_status_events where notification_id = ${id}`;
  t.equal(events.length, 0, "and logged nothing");
});
