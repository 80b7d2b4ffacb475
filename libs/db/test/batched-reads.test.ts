import { randomUUID } from "node:crypto";
import { countingDatabase, freshDatabase, seedNotification } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { type DeliveryRef, loadChannel } from "../src/delivery/channel.js";
import { readProfileRow } from "../src/index.js";

const { database, url } = await freshDatabase(t);
const { sql } = database;

const ids = Array.from({ length: 6 }, () => randomUUID());
await Promise.all(ids.map((id, i) => seedNotification(database, { id, clientId: "c", userId: `u${i}` })));
// Every notification has an email channel; the even ones an sms channel too, further along.
await sql`insert into notification_channels ${sql(
  ids.flatMap((id, i) => [
    { notification_id: id, channel: "email", status: "pending", attempts: 0 },
    ...(i % 2 === 0 ? [{ notification_id: id, channel: "sms", status: "retrying", attempts: i + 1 }] : []),
  ]),
)}`;
await sql`insert into user_contacts (user_id, email, phone) values ('u0', 'u0@example.com', null), ('u1', null, '+15550001')`;
await sql`insert into user_preferences (user_id, channel_optout, locale) values ('u1', ${["sms"]}, 'fr'), ('u2', ${["email"]}, null)`;

const refs: DeliveryRef[] = ids.flatMap((id, i) => [
  { notification_id: id, channel: "email" as const, user_id: `u${i}` },
  { notification_id: id, channel: "sms" as const, user_id: `u${i}` },
  { notification_id: id, channel: "push" as const, user_id: `u${i}` },
]);
const missing: DeliveryRef = { notification_id: randomUUID(), channel: "email", user_id: "u0" };

/** What one read of one channel finds, asked on its own. */
async function alone(ref: DeliveryRef) {
  const [row] = await sql`select status, attempts, attempts_before_replay from notification_channels
    where notification_id = ${ref.notification_id} and channel = ${ref.channel}`;
  return row ? { ...row } : undefined;
}

t.test("channel reads made in one iteration go in one statement, each answered with its own row", async (t) => {
  const db = await countingDatabase(t, url);
  const statements = db.statements;
  const asked = [...refs, missing, refs[0] as DeliveryRef];
  const rows = await Promise.all(asked.map((ref) => loadChannel(db.sql, ref)));
  t.equal(statements(), 1, `${asked.length} reads, one statement`);
  t.same(
    rows.map((r) => (r ? { ...r } : undefined)),
    await Promise.all(asked.map(alone)),
  );
  t.equal(rows.at(-2), undefined, "a channel without a row reads as undefined");
});

t.test("reads of the same iteration made from separate callbacks are gathered too", async (t) => {
  const db = await countingDatabase(t, url);
  const statements = db.statements;
  const reads = await new Promise<Array<Promise<unknown>>>((resolve) => {
    const started: Array<Promise<unknown>> = [];
    // Three callbacks of one check phase, as pulled messages are handled in one poll phase.
    for (const ref of refs.slice(0, 3)) setImmediate(() => started.push(loadChannel(db.sql, ref)));
    setImmediate(() => resolve(started));
  });
  await Promise.all(reads);
  t.equal(statements(), 1);
});

t.test("reads in later iterations are statements of their own", async (t) => {
  const db = await countingDatabase(t, url);
  const statements = db.statements;
  for (const ref of refs.slice(0, 3)) await loadChannel(db.sql, ref);
  t.equal(statements(), 3);
});

t.test("any mix of channel reads answers each as a read on its own would (fast-check)", async (t) => {
  const db = await countingDatabase(t, url);
  const expected = new Map(
    await Promise.all([...refs, missing].map(async (ref) => [JSON.stringify(ref), await alone(ref)] as const)),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(fc.constantFrom(...refs, missing), { maxLength: 40 }), async (asked) => {
      const rows = await Promise.all(asked.map((ref) => loadChannel(db.sql, ref)));
      rows.forEach((row, i) => {
        t.same(row ? { ...row } : undefined, expected.get(JSON.stringify(asked[i])));
      });
    }),
    { numRuns: 60 },
  );
});

t.test("profile reads made in one iteration go in one statement, a user without records as all nulls", async (t) => {
  const db = await countingDatabase(t, url);
  const statements = db.statements;
  const users = ["u0", "u1", "u2", "nobody", "u1"];
  const rows = await Promise.all(users.map((u) => readProfileRow(db, u)));
  t.equal(statements(), 1);
  const pick = (row: (typeof rows)[number]) => ({
    email: row.email,
    phone: row.phone,
    channel_optout: row.channel_optout,
    locale: row.locale,
  });
  t.same(rows.map(pick), [
    { email: "u0@example.com", phone: null, channel_optout: null, locale: null },
    { email: null, phone: "+15550001", channel_optout: ["sms"], locale: "fr" },
    { email: null, phone: null, channel_optout: ["email"], locale: null },
    { email: null, phone: null, channel_optout: null, locale: null },
    { email: null, phone: "+15550001", channel_optout: ["sms"], locale: "fr" },
  ]);
});

t.test("a failed statement fails every read of its batch, and the next batch reads again", async (t) => {
  const db = await countingDatabase(t, url);
  await sql`alter table notification_channels rename to notification_channels_away`;
  const failed = await Promise.allSettled(refs.slice(0, 4).map((ref) => loadChannel(db.sql, ref)));
  await sql`alter table notification_channels_away rename to notification_channels`;
  t.same(
    failed.map((f) => f.status),
    ["rejected", "rejected", "rejected", "rejected"],
  );
  t.same({ ...(await loadChannel(db.sql, refs[0] as DeliveryRef)) }, await alone(refs[0] as DeliveryRef));
});
