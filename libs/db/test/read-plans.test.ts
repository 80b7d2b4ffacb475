import { countingDatabase, freshDatabase } from "@notify/testing";
import t from "tap";
import {
  listInboxItems,
  listUserNotificationRecords,
  searchNotificationRecords,
  takeArchiveBatch,
} from "../src/index.js";

// The reads that take a page or a batch out of a large table reach it through an index, in the
// index's order: no plan sorts every row of a user, nor scans the whole log for a batch. Each is
// run once on tables of some size, with their statistics, and the statement it sent is
// EXPLAINed with the same parameters.
const { database, url } = await freshDatabase(t);
const statements: Array<{ query: string; parameters: readonly unknown[] }> = [];
const captured = await countingDatabase(t, url, (query, parameters) => statements.push({ query, parameters }));

// One heavy user (20,000 notifications, a second apart), 20,000 spread over 2,000 others; the
// oldest quarter of each older than 30 days.
await database.sql`
  insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
  select 'n-' || i, 'c', case when i % 2 = 0 then 'heavy' else 'u-' || (i % 2000) end, 'account', 'welcome',
         'transactional', '{}', 'n-' || i, 'h', 0, now() - make_interval(secs => i * 160)
  from generate_series(1, 40000) i`;
await database.sql`analyze`;

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/** The plan of the last statement sent that reads `from <table>`. */
async function planOfLast(table = "notifications n"): Promise<PlanNode[]> {
  const statement = statements.findLast((s) => s.query.includes(`from ${table}`));
  if (!statement) throw new Error(`no statement on ${table} was sent`);
  statements.length = 0;
  const [row] = await database.sql.unsafe(`explain (format json) ${statement.query}`, statement.parameters as never[]);
  const [explained] = (row?.["QUERY PLAN"] ?? []) as Array<{ Plan: PlanNode }>;
  if (!explained) throw new Error("EXPLAIN gave no plan");
  return nodes(explained.Plan);
}
// The log is partitioned: each partition has its own copy of the index, under a name of its own.
const userIndex = (name: string | undefined) => (name && /user/.test(name) ? "notifications_user_created_idx" : name);
const onNotifications = (plan: PlanNode[]) => [
  ...new Set(
    plan
      .filter((n) => /^notifications(_|$)/.test(n["Relation Name"] ?? ""))
      .map((n) => `${n["Node Type"]} ${userIndex(n["Index Name"]) ?? ""}`),
  ),
];

t.test("a user's notifications, page after page, are read in the index's order", async (t) => {
  const query = { clientId: "c", userId: "heavy", after: null, limit: 50 };
  const first = await listUserNotificationRecords(captured, query);
  t.equal(first.records.length, 50);
  let plan = await planOfLast();
  t.notOk(
    plan.some((n) => n["Node Type"].includes("Sort")),
    "the first page sorts nothing (the order by matches the index's, nulls included)",
  );
  t.same(onNotifications(plan), ["Index Scan notifications_user_created_idx"]);

  const deep = await listUserNotificationRecords(captured, { ...query, after: first.last });
  t.equal(deep.records.length, 50);
  const [next, previous] = [deep.records[0]?.created_at ?? "", first.records.at(-1)?.created_at ?? ""];
  t.ok(next !== "" && next < previous, `the next page follows on: ${next} after ${previous}`);
  const ids = new Set([...first.records, ...deep.records].map((r) => r.notification_id));
  t.equal(ids.size, 100, "no notification on both pages");
  plan = await planOfLast();
  t.notOk(
    plan.some((n) => n["Node Type"].includes("Sort")),
    "a next page sorts nothing",
  );
  const scan = plan.find((n) => userIndex(n["Index Name"]) === "notifications_user_created_idx");
  t.match(scan?.["Index Cond"], /created_at/, "the keyset starts the index scan, not a filter over the user's rows");
});

t.test("an operator's search by user is read in the index's order", async (t) => {
  const found = await searchNotificationRecords(captured, { userId: "heavy", clientId: "c", limit: 20 });
  t.equal(found.length, 20);
  const plan = await planOfLast();
  t.notOk(
    plan.some((n) => n["Node Type"].includes("Sort")),
    "no sort of every notification of the user",
  );
});

t.test("retention takes its batch through an index on created_at, not a scan of the log", async (t) => {
  const refused = new Error("kept nothing: the batch rolls back");
  const taken = await takeArchiveBatch(captured, { days: 30, batchSize: 100 }, async (rows) => {
    t.equal(rows.length, 100);
    throw refused;
  }).catch((error: unknown) => error);
  t.equal(taken, refused);
  const plan = await planOfLast();
  t.notOk(
    onNotifications(plan).some((n) => n.startsWith("Seq Scan")),
    `no sequential scan of notifications: ${onNotifications(plan).join(", ")}`,
  );
});

t.test("each inbox view of a heavy user is read through its own index", async (t) => {
  // 30,000 items of one user, every one read but 30, 30 archived; 30,000 of another who archives
  // all but 30 (the inbox-zero reader); 30,000 of 3,000 others. Stored unread, then read and
  // archived by later updates, as users do (which moves the rows about the table).
  await database.sql`
    insert into inbox_items (user_id, client_id, notification_id, category, body)
    select case when i % 3 = 0 then 'heavy' when i % 3 = 1 then 'zero' else 'u-' || (i % 3000) end, 'c',
           'in-' || i, 'account', 'b'
    from generate_series(1, 90000) i`;
  await database.sql`update inbox_items set read_at = now() - make_interval(secs => id)
    where user_id <> 'heavy' or id % 3000 <> 0`;
  await database.sql`update inbox_items set archived_at = now() - make_interval(secs => id)
    where (user_id = 'heavy' and id % 3000 = 3) or (user_id = 'zero' and id % 3000 <> 1)`;
  await database.sql`vacuum analyze inbox_items`;
  // The items are partitioned (drizzle/0031): each partition's index is named after the
  // partitioned table's index it belongs to; a partition with no page (the items here are of no
  // notification of the log: all in the default partition) costs nothing to scan.
  const indexes = await database.sql<{ index: string; parent: string; empty: boolean }[]>`
    select c.relname as index, p.relname as parent, t.relpages = 0 as empty
    from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
    join pg_index x on x.indexrelid = c.oid join pg_class t on t.oid = x.indrelid
    where p.relname like 'inbox_items%' and p.relkind = 'I'`;
  const parentOf = new Map(indexes.map((r) => [r.index, r.parent]));
  const [empty] = await database.sql<{ names: string[] }[]>`
    select array_agg(c.relname::text) as names from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'inbox_items'::regclass and c.relpages = 0`;
  const emptied = new Set([...(empty?.names ?? []), ...indexes.filter((r) => r.empty).map((r) => r.index)]);
  for (const [userId, filter, index] of [
    ["zero", "inbox", "inbox_items_live_idx"],
    ["heavy", "archived", "inbox_items_archived_idx"],
    ["heavy", "unread", "inbox_items_unread_idx"],
  ] as const) {
    const page = await listInboxItems(captured, { userId, clientId: "c" }, filter, 20, null);
    t.equal(page.items.length, 20, `${filter}: a page of the ${userId} user's 30`);
    const plan = await planOfLast("inbox_items");
    const scans = plan
      .filter((n) => n["Node Type"].includes("Scan"))
      .filter((n) => !emptied.has(n["Relation Name"] ?? n["Index Name"] ?? ""))
      .map((n) => (n["Index Name"] ? (parentOf.get(n["Index Name"]) ?? n["Index Name"]) : n["Node Type"]));
    t.ok(
      scans.includes(index) && scans.every((scan) => scan === index || scan === "Bitmap Heap Scan"),
      `${filter}: through ${index} alone (${scans.join(", ")})`,
    );
  }
});
