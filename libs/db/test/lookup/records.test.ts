import { freshDatabase } from "@notify/testing";
import t from "tap";
import { acceptNotifications } from "../../src/accept/notifications.js";
import { listUserNotificationRecords, readNotification } from "../../src/lookup/records.js";
import { acceptedRow } from "../support.js";

// Notifications read back with their channels, only by their own client, and a user's list
// keyset-paged at the database's precision.
const { database } = await freshDatabase(t);
const { sql } = database;

const row = acceptedRow;

t.test("a notification reads with its channels, only for its own client", async (t) => {
  const n = row("c5", "r1");
  await acceptNotifications(database, [n], 24);
  const bare = await readNotification(database, "c5", n.id);
  t.same(bare?.channels, {}, "not routed yet: no channels");
  t.equal(await readNotification(database, "another", n.id), null);
  await sql`insert into notification_channels (notification_id, channel, status, next_attempt_at)
    values (${n.id}, 'email', 'deferred', now() + interval '1 hour'),
           (${n.id}, 'sms', 'sent', now() + interval '1 hour')`;
  const read = await readNotification(database, "c5", n.id);
  t.type(read?.channels.email?.next_attempt_at, "string", "a waiting channel shows when it is due");
  t.equal(read?.channels.sms?.next_attempt_at, null, "a sent one does not");

  const page = await listUserNotificationRecords(database, { clientId: "c5", userId: "u1", after: null, limit: 10 });
  t.same(
    page.records.map((r) => r.notification_id),
    [n.id],
  );
  t.same(page.records[0]?.channels, read?.channels);
  t.equal(page.hasMore, false);
});

t.test("the user's list is keyset-paged in (created_at desc, id) order at microsecond precision", async (t) => {
  // One batch shares its created_at: the id breaks the tie.
  const batch = [row("c6", "l1"), row("c6", "l2"), row("c6", "l3")];
  await acceptNotifications(database, batch, 24);
  const ids: string[] = [];
  let after = null;
  for (let i = 0; i < 5; i++) {
    const page = await listUserNotificationRecords(database, { clientId: "c6", userId: "u1", after, limit: 2 });
    ids.push(...page.records.map((r) => r.notification_id));
    if (!page.hasMore) break;
    after = page.last;
  }
  t.same(ids, batch.map((b) => b.id).sort(), "every row once, in id order within the commit");
  const filtered = await listUserNotificationRecords(database, {
    clientId: "c6",
    userId: "u1",
    status: "delivered",
    after: null,
    limit: 10,
  });
  t.same(filtered.records, [], "the status filter needs a channel in that status");
});
