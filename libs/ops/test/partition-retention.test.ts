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
