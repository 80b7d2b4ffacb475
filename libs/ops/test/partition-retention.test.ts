import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { type ArchiveRecord, detachedPartitions, detachPartition, extendLog, logPartitions } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { folderStore } from "../src/archive-store.js";
import { retirePartitions } from "../src/partition-retention.js";
import { restoreNotification } from "../src/retention.js";
import { live, seed, snapshot } from "./retention-support.js";

// Retention by partition: a range of the log wholly past the window is detached, archived and
// dropped at once; what still has work to do stays, in the default partition.
const { database } = await freshDatabase(t);
const DAY_MS = 86_400_000;

/** A delivered notification whose id (and created_at) is `inDays` from now, with what hangs off it. */
const seedAt = (userId: string, inDays: number) => seed(database, userId, -inDays);

const partitionOf = async (table: string, column: string, id: string) => {
  const [row] = await database.sql.unsafe<{ part: string }[]>(
    `select tableoid::regclass::text as part from ${table} where ${column} = $1`,
    [id],
  );
  return row?.part;
};

function files(dir: string, base = ""): string[] {
  return readdirSync(join(dir, base), { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? files(dir, `${base}${entry.name}/`) : [`${base}${entry.name}`]))
    .sort();
}

const archived = (dir: string) =>
  files(dir)
    .filter((key) => key.endsWith(".ndjson.gz"))
    .flatMap((key) =>
      gunzipSync(readFileSync(join(dir, key)))
        .toString("utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as ArchiveRecord),
    );

t.test("the log has its partitions a week ahead, and the job makes more as time goes on", async (t) => {
  const before = await logPartitions(database);
  t.ok(before.length >= 8, `${before.length} range partitions`);
  const last = before.at(-1);
  t.ok(last && last.toAt.getTime() >= Date.now() + 6 * DAY_MS, "a week ahead");
  // A row the default partition took (no range held it yet) moves into the range made for it.
  const early = await seedAt("early", 12);
  t.equal(await partitionOf("notifications", "id", early), "notifications_default");
  const made = await extendLog(database, { aheadMs: 14 * DAY_MS, widthHours: 24 });
  t.ok(made >= 5, `made ${made} ranges`);
  t.match(await partitionOf("notifications", "id", early), /^notifications_p\d{8}$/, "the early row moved in");
  t.match(await partitionOf("notification_channels", "notification_id", early), /^notification_channels_p\d{8}$/);
  t.equal(await extendLog(database, { aheadMs: 14 * DAY_MS, widthHours: 24 }), 0, "made once");
});

t.test(
  "the rows of the log's ranges from before the receipts, inbox and recipients were partitioned are archived, kept and dropped with them",
  async (t) => {
    // Their first partition holds every id up to the end of the log's range of migration 0031's
    // moment: it spans the log's first partition and the range after it.
    const dir = mkdtempSync(join(tmpdir(), "notify-partitions-"));
    const store = folderStore(dir);
    const [first] = await logPartitions(database);
    t.equal(first?.suffix, "_p0", "the log's first partition");
    const [bound] = await database.sql<{ to_id: string }[]>`
    select (regexp_match(pg_get_expr(relpartbound, oid), 'TO \\(''([^'']*)''\\)'))[1] as to_id
    from pg_class where relname = 'inbox_items_p0'`;
    const spanned = (await logPartitions(database)).find((p) => p.toId === bound?.to_id);
    t.ok(
      spanned && first && spanned.toId > first.toId,
      "the inbox's first partition ends with a later range of the log",
    );
    const gone = await seed(database, "old", 30);
    const kept = await seed(database, "old", 30);
    await database.sql`insert into deferred_notifications (notification_id, user_id, due_at)
    values (${kept}, 'old', now() + interval '1 hour')`;
    for (const id of [gone, kept]) {
      await database.sql`
      insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, notification_id, applied_at)
      values ('sendgrid', ${`ev-old-${id}`}, ${`pm-${id}`}, 'delivered', null, ${database.sql.json({ notification_id: id })}, ${id}, now())`;
      await database.sql`insert into inbox_items (user_id, client_id, notification_id, category, title, body)
      values ('old', 'shop', ${id}, 'news', 'Hi', ${`Old ${id}`})`;
    }
    t.equal(await partitionOf("notifications", "id", gone), "notifications_p0");
    t.equal(await partitionOf("inbox_items", "notification_id", gone), "inbox_items_p0");
    const count = async (table: string, id: string) =>
      (
        await database.sql.unsafe<{ n: number }[]>(
          `select count(*)::int as n from ${table} where notification_id = $1`,
          [id],
        )
      )[0]?.n;

    // The log's first partition retires alone: the inbox's first partition, which holds later ids
    // too, stays attached, and its rows of the retired range are archived from it.
    const retired = await retirePartitions(database, {
      store,
      days: 1,
      asOf: new Date((first?.toAt.getTime() ?? 0) + DAY_MS),
    });
    t.equal(retired.partitions, 1, "the log's first partition");
    t.equal(await partitionOf("inbox_items", "notification_id", gone), "inbox_items_p0", "still there, attached");
    t.equal(await count("provider_receipts", kept), 1);
    const record = archived(dir).find((r) => r.notification.id === gone);
    t.same(
      record?.receipts?.map((r) => r.event_id),
      [`ev-old-${gone}`],
      "its receipts are in the archive",
    );
    t.equal(record?.inbox_item?.body, `Old ${gone}`, "and its inbox item");

    // With the range it ends with, the inbox's first partition retires: the kept notification's
    // rows stay with it, in the default partitions.
    await retirePartitions(database, { store, days: 1, asOf: new Date((spanned?.toAt.getTime() ?? 0) + DAY_MS) });
    t.equal(await partitionOf("notifications", "id", kept), "notifications_default");
    for (const table of ["provider_receipts", "inbox_items"]) {
      t.equal(await count(table, gone), 0, `${table}: the retired notification's rows are gone`);
      t.equal(
        await partitionOf(table, "notification_id", kept),
        `${table}_default`,
        `${table}: the kept one's rows stay`,
      );
    }
    const [attached] = await database.sql<{ n: number }[]>`
    select count(*)::int as n from pg_class where relname in ('provider_receipts_p0', 'inbox_items_p0', 'broadcast_recipients_p0')`;
    t.equal(attached?.n, 0, "their first partitions are dropped");
  },
);

t.test("a partition past the window is archived and dropped whole; work still to do stays", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-partitions-"));
  const store = folderStore(dir);
  const gone = [await seedAt("ada", 1), await seedAt("ada", 2), await seedAt("bob", 2)];
  const expected = await snapshot(database, gone);
  // Still to do: a deferral, and an item of a digest not sent yet. Done: an item of a sent digest.
  const deferred = await seedAt("ada", 1);
  await database.sql`insert into deferred_notifications (notification_id, user_id, due_at)
    values (${deferred}, 'ada', now() + interval '1 hour')`;
  const [open] = await database.sql<{ id: string }[]>`
    insert into digests (id, client_id, user_id, template_id, key, status, max_items, closes_at)
    values ('d-open', 'shop', 'ada', 'welcome', 'k', 'open', 10, now() + interval '1 hour') returning id`;
  const [sent] = await database.sql<{ id: string }[]>`
    insert into digests (id, client_id, user_id, template_id, key, status, max_items, closes_at, sent_at)
    values ('d-sent', 'shop', 'bob', 'welcome', 'k2', 'sent', 10, now(), now()) returning id`;
  const waiting = await seedAt("ada", 2);
  await database.sql`insert into digest_items (digest_id, notification_id) values (${open?.id as string}, ${waiting})`;
  await database.sql`insert into digest_items (digest_id, notification_id) values (${sent?.id as string}, ${gone[2] as string})`;
  const later = await seedAt("ada", 6);

  // Four days from now, with a window of one day: every range ending by then is past it.
  const asOf = new Date(Date.now() + 4 * DAY_MS);
  const ranges = (await logPartitions(database)).filter((p) => p.toAt.getTime() <= asOf.getTime() - DAY_MS);
  const retired = await retirePartitions(database, { store, days: 1, asOf, chunk: 2 });
  t.equal(retired.partitions, ranges.length, "every range past the window");
  t.equal(retired.kept, 2, "the deferred one and the digest's waiting item stay");
  t.equal(retired.archived >= gone.length, true, `${retired.archived} archived`);
  t.same(await live(database, gone), [], "gone from the live log");
  t.same(await live(database, [deferred, waiting].sort()), [deferred, waiting].sort(), "still live");
  t.equal(await partitionOf("notifications", "id", deferred), "notifications_default", "kept outside the ranges");
  t.equal(await partitionOf("notification_channels", "notification_id", waiting), "notification_channels_default");
  t.same(await live(database, [later]), [later], "a later range is untouched");
  t.same(await detachedPartitions(database), [], "nothing left detached");
  const left = await database.sql<{ n: number }[]>`
    select count(*)::int as n from pg_class where relname = any(${ranges.map((p) => `notifications${p.suffix}`)}::text[])`;
  t.equal(left[0]?.n, 0, "the tables are dropped");
  const items = await database.sql<{ notification_id: string }[]>`select notification_id from digest_items order by 1`;
  t.same(
    items.map((i) => i.notification_id),
    [waiting],
    "the sent digest's item went with its partition; the waiting one stays",
  );

  const records = archived(dir);
  const byId = new Map(records.map((r) => [r.notification.id, r]));
  for (const id of gone) {
    const record = byId.get(id);
    t.ok(record, `${id} archived`);
    t.equal(record?.channels.length, 1);
    t.equal(record?.status_events.length, 1);
    t.equal(record?.attempts.length, 1);
    t.equal(record?.fallbacks?.length, 1);
  }
  t.notOk(byId.has(deferred), "work still to do is not archived");
  t.ok(
    files(dir).some((key) => key.endsWith(".manifest.json")),
    "each object has its manifest",
  );

  const back = await restoreNotification(database, store, gone[1] as string);
  t.same(back, { found: true, restored: true });
  t.same(
    await snapshot(database, [gone[1] as string]),
    [expected[1]],
    "restored as it was, with all that hangs off it",
  );
});

t.test("a partition detached by a run that stopped is archived and dropped by the next", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-partitions-"));
  const id = await seedAt("cy", 5);
  const asOf = new Date(Date.now() + 7 * DAY_MS);
  const partitions = await logPartitions(database);
  const target = partitions.find((p) => p.fromId !== null && p.fromId <= id && id < p.toId);
  if (!target) throw new Error("no range holds the seeded id");
  await detachPartition(database, target.suffix);
  t.same(await live(database, [id]), [], "detached: out of the live log");
  t.ok((await detachedPartitions(database)).includes(target.suffix));
  const retired = await retirePartitions(database, { store: folderStore(dir), days: 1, asOf });
  t.ok(retired.partitions >= 1);
  t.same(await detachedPartitions(database), []);
  t.ok(
    archived(dir).some((r) => r.notification.id === id),
    "its rows are in the archive",
  );
});

t.test("receipts, inbox items and broadcast recipients retire with their notification's day", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-partitions-"));
  const store = folderStore(dir);
  const gone = await seedAt("dee", 9);
  const kept = await seedAt("dee", 9);
  await database.sql`insert into deferred_notifications (notification_id, user_id, due_at)
    values (${kept}, 'dee', now() + interval '1 hour')`;
  for (const id of [gone, kept]) {
    // An applied receipt, one still waiting for its send, the in-app copy (unread), the broadcast's row.
    await database.sql`
      insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, notification_id, applied_at)
      values ('sendgrid', ${`ev-a-${id}`}, ${`pm-${id}`}, 'delivered', null, ${database.sql.json({ notification_id: id })}, ${id}, now()),
             ('sendgrid', ${`ev-w-${id}`}, ${`pm-other-${id}`}, 'bounced', null, ${database.sql.json({ notification_id: id })}, ${id}, null)`;
    await database.sql`insert into inbox_items (user_id, client_id, notification_id, category, title, body)
      values ('dee', 'shop', ${id}, 'news', 'Hi', 'Hello Dee')`;
    await database.sql`insert into broadcast_recipients (broadcast_id, user_id, notification_id) values ('b-dee', 'dee', ${id})`;
  }
  t.match(await partitionOf("provider_receipts", "notification_id", gone), /^provider_receipts_p\d{8}$/, "in its day");
  t.match(await partitionOf("inbox_items", "notification_id", gone), /^inbox_items_p\d{8}$/);
  t.match(await partitionOf("broadcast_recipients", "notification_id", gone), /^broadcast_recipients_p\d{8}$/);
  const [item] = await database.sql<{ id: string }[]>`select id::text from inbox_items where notification_id = ${gone}`;

  const retired = await retirePartitions(database, { store, days: 1, asOf: new Date(Date.now() + 11 * DAY_MS) });
  t.ok(retired.kept >= 1, "the deferred one stays");
  const count = (table: string, id: string) =>
    database.sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table} where notification_id = $1`, [id]);
  for (const table of ["provider_receipts", "inbox_items", "broadcast_recipients"]) {
    t.equal((await count(table, gone))[0]?.n, 0, `${table}: the retired day's rows are gone`);
    t.equal(
      await partitionOf(table, "notification_id", kept),
      `${table}_default`,
      `${table}: the kept one's rows stay`,
    );
  }
  t.equal((await count("provider_receipts", kept))[0]?.n, 2, "its waiting receipt with it");
  const tables = await database.sql<{ relname: string }[]>`
    select relname from pg_class where relname ~ '^(provider_receipts|inbox_items|broadcast_recipients)_p2' and relkind = 'r'
      and not relispartition`;
  t.same(tables, [], "their detached tables are dropped");

  const record = archived(dir).find((r) => r.notification.id === gone);
  t.same(
    record?.receipts?.map((r) => r.event_id),
    [`ev-a-${gone}`, `ev-w-${gone}`],
    "its receipts are archived with it",
  );
  t.equal(record?.inbox_item?.body, "Hello Dee", "and its inbox item");
  t.same(await restoreNotification(database, store, gone), { found: true, restored: true });
  t.equal((await count("provider_receipts", gone))[0]?.n, 2, "restored with its receipts");
  const [back] = await database.sql<{ id: string }[]>`select id::text from inbox_items where notification_id = ${gone}`;
  t.equal(back?.id, item?.id, "and its inbox item, under its id");
});
