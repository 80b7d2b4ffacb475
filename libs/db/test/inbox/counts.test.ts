import { countingDatabase, freshDatabase, seedNotification } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { storeInboxItem } from "../../src/delivery/in-app.js";
import { patchPreferences, readPreferences, writePreferences } from "../../src/directory/preferences.js";
import {
  countInboxItems,
  type InboxMarkAction,
  listenForInboxStates,
  markAllInboxItems,
  recentInboxCategories,
  setInboxItemState,
} from "../../src/inbox/items.js";
import { createDb } from "../../src/pool.js";

// The inbox's counts, each from its own partial index alone; mark-all in one statement; a change
// of an item's state wakes the user's streams only when it moves a count; the categories a
// client sent a user; and the user's own changes to their preferences, which leave the rest of
// the document as it is.
const { database, url } = await freshDatabase(t);
const { sql } = database;

let n = 0;
const store = async (userId: string, client = "c1", category = "account") => {
  const id = `n-${n++}`;
  await seedNotification(database, { id, clientId: client, userId, category });
  return storeInboxItem(sql, { userId, notificationId: id, category, title: null, body: "b" });
};
const owner = (userId: string, clientId = "c1") => ({ userId, clientId });

t.test("counts and mark-all, up to an id, of one owner", async (t) => {
  const ids = [await store("u1"), await store("u1"), await store("u1"), await store("u1")];
  await store("u1", "c2");
  await store("u2");
  t.same(await countInboxItems(database, owner("u1")), { unread: 4, unseen: 4, total: 4 });
  await setInboxItemState(database, owner("u1"), ids[3] as number, { archived: true });
  t.equal(await markAllInboxItems(database, owner("u1"), "read", ids[1] as number), 2, "up to and including");
  t.same(await countInboxItems(database, owner("u1")), { unread: 1, unseen: 3, total: 3 });
  t.equal(await markAllInboxItems(database, owner("u1"), "read", null), 1, "the archived one is left out");
  t.equal(await markAllInboxItems(database, owner("u1"), "read", null), 0, "nothing left to mark");
  t.equal(await markAllInboxItems(database, owner("u1"), "archived", null), 3);
  t.same(await countInboxItems(database, owner("u1")), { unread: 0, unseen: 0, total: 0 });
  t.same(await countInboxItems(database, owner("u1", "c2")), { unread: 1, unseen: 1, total: 1 }, "another client's");
  t.same(await countInboxItems(database, owner("u2")), { unread: 1, unseen: 1, total: 1 }, "another user's");
});

t.test("a change of state wakes the user's streams when it moves a count, and only then", async (t) => {
  const woken: string[] = [];
  let awaited: { userId: string; resolve: () => void } | undefined;
  const wokenFor = (userId: string) =>
    new Promise<void>((resolve) => {
      awaited = { userId, resolve };
    });
  const listening = await listenForInboxStates(database, (userId) => {
    woken.push(userId);
    if (awaited?.userId === userId) awaited.resolve();
  });
  t.teardown(() => listening.unlisten());
  const id = await store("u3");
  const marker = await store("u3-marker");
  let woke = wokenFor("u3");
  await setInboxItemState(database, owner("u3"), id, { read: true });
  await woke;
  // Neither a repeat, nor a mark-all that finds nothing, nor another owner's attempt notifies:
  // notifications arrive in commit order, so the marker's is the next one heard.
  await setInboxItemState(database, owner("u3"), id, { read: true });
  await markAllInboxItems(database, owner("u3"), "read", null);
  await setInboxItemState(database, owner("u4"), id, { seen: true });
  woke = wokenFor("u3-marker");
  await setInboxItemState(database, owner("u3-marker"), marker, { archived: true });
  await woke;
  t.same(woken, ["u3", "u3-marker"]);

  // Read and seen of an archived item count nowhere: changing them wakes nobody.
  const archived = await store("u6");
  woke = wokenFor("u6");
  await setInboxItemState(database, owner("u6"), archived, { archived: true });
  await woke;
  await setInboxItemState(database, owner("u6"), archived, { read: true, seen: true });
  const second = await store("u3-marker");
  woke = wokenFor("u3-marker");
  await setInboxItemState(database, owner("u3-marker"), second, { archived: true });
  await woke;
  t.same(woken, ["u3", "u3-marker", "u6", "u3-marker"], "the archived item's read and seen woke nobody");
});

t.test("the counts read their partial indexes alone, and mark-all locks in id order", async (t) => {
  const statements: Array<{ query: string; parameters: readonly unknown[] }> = [];
  const captured = await countingDatabase(t, url, (query, parameters) => statements.push({ query, parameters }));
  await sql`
    insert into inbox_items (user_id, client_id, notification_id, category, body, read_at, seen_at)
    select case when i % 2 = 0 then 'heavy' else 'u-' || (i % 2000) end, 'c', 'plan-' || i, 'account', 'b',
           case when i % 7 = 0 then null else now() end, case when i % 5 = 0 then null else now() end
    from generate_series(1, 40000) i`;
  await sql`vacuum analyze inbox_items`;
  const counts = await countInboxItems(captured, owner("heavy", "c"));
  t.ok(counts.total > 0 && counts.unread > 0 && counts.unseen > 0, JSON.stringify(counts));
  const statement = statements.findLast((s) => s.query.includes("count(*)"));
  const [row] = await sql.unsafe(`explain (format json) ${statement?.query}`, statement?.parameters as never[]);
  interface PlanNode {
    "Node Type": string;
    "Relation Name"?: string;
    "Index Name"?: string;
    Plans?: PlanNode[];
  }
  const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];
  const [explained] = (row?.["QUERY PLAN"] ?? []) as Array<{ Plan: PlanNode }>;
  // The items are partitioned (drizzle/0031): each partition's index is named after the
  // partitioned table's index it belongs to; a partition with no page (the items here are of no
  // notification of the log: all in the default partition) costs nothing to scan.
  const parents = new Map(
    (
      await sql<{ index: string; parent: string }[]>`
        select c.relname as index, p.relname as parent from pg_inherits i
        join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
        where p.relname like 'inbox_items%' and p.relkind = 'I'`
    ).map((r) => [r.index, r.parent]),
  );
  const empty = new Set(
    (
      await sql<{ name: string }[]>`
        select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = 'inbox_items'::regclass and c.relpages = 0`
    ).map((r) => r.name),
  );
  const scans = nodes(explained?.Plan as PlanNode)
    .filter((node) => node["Node Type"].includes("Scan"))
    .filter((node) => !(node["Node Type"] === "Seq Scan" && empty.has(node["Relation Name"] ?? "")))
    .map((node) => {
      const index = node["Index Name"] ?? "";
      return `${node["Node Type"]} ${parents.get(index) ?? index}`.trim();
    });
  t.same(
    scans.sort(),
    [
      "Index Only Scan inbox_items_live_idx",
      "Index Only Scan inbox_items_unread_idx",
      "Index Only Scan inbox_items_unseen_idx",
    ],
    "each count from its index, no item read (partitions with no page aside)",
  );
  t.equal(await markAllInboxItems(database, owner("heavy", "c"), "read", null), counts.unread);
});

t.test("mark-alls and single marks of one user at once never wait for each other in a cycle", async (t) => {
  // A deadlock is found after deadlock_timeout (1 s by default); only a superuser may lower it.
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(() => admin.end());
  const [{ name } = { name: "" }] = await admin<{ name: string }[]>`select current_database() as name`;
  await admin.unsafe(`alter database "${name}" set deadlock_timeout = '100ms'`).catch(() => undefined);
  const pools = Array.from({ length: 4 }, (_, i) => {
    const pool = createDb({ url, max: 3, applicationName: `inbox-marks-${i}` });
    t.teardown(() => pool.close());
    return pool;
  });
  const actions: InboxMarkAction[] = ["read", "seen", "archived"];
  for (let round = 0; round < 10; round++) {
    const user = `busy-${round}`;
    const ids: number[] = [];
    for (let i = 0; i < 40; i++) ids.push(await store(user));
    const pick = <T>(items: readonly T[]) => items[Math.floor(Math.random() * items.length)] as T;
    const work = [
      ...pools.map((pool) => () => markAllInboxItems(pool, owner(user), pick(actions), pick([null, ...ids]))),
      ...Array.from({ length: 20 }, () => () => {
        const change = { [pick(actions)]: Math.random() < 0.7 };
        return setInboxItemState(pick(pools), owner(user), pick(ids), change);
      }),
    ].sort(() => Math.random() - 0.5);
    const outcomes = await Promise.allSettled(work.map((run) => run()));
    const failed = outcomes.flatMap((o) => (o.status === "rejected" ? [String(o.reason)] : []));
    t.same(failed, [], `round ${round}: every statement committed`);
  }
});

t.test("the categories the client sent the user lately", async (t) => {
  await store("u5", "c1", "orders");
  await store("u5", "c1", "news");
  await store("u5", "c1", "news");
  await store("u5", "c2", "statements");
  await seedNotification(database, { id: "email-only", clientId: "c1", userId: "u5", category: "billing" });
  t.same(await recentInboxCategories(database, owner("u5"), 100), ["billing", "news", "orders"]);
  t.same(await recentInboxCategories(database, owner("u5", "c2"), 100), ["statements"]);
  t.same(await recentInboxCategories(database, owner("nobody"), 100), []);
});

t.test("a user's patch changes the fields it names, and keeps the opt-outs it is told to", async (t) => {
  const created = await patchPreferences(database, "p1", { time_zone: "Europe/London" }, []);
  t.match(created, { time_zone: "Europe/London", channel_optout: [], category_optout: [], rate_cap_per_day: null });
  await writePreferences(database, "p2", {
    channel_optout: ["sms"],
    category_optout: ["news", "otp"],
    quiet_hours: { start: "22:00", end: "07:00", tz: "UTC" },
    rate_cap_per_day: 5,
    device_tokens: [{ endpoint: "https://push.example.com/x", keys: { p256dh: "k", auth: "a" } }],
    locale: "fr",
    time_zone: null,
  });
  const patched = await patchPreferences(database, "p2", { category_optout: ["promo", "a-b", "a_b"] }, ["otp"]);
  t.same(patched.category_optout, ["a-b", "a_b", "otp", "promo"], "the kept one stays, in code-point order");
  t.match(await readPreferences(database, "p2"), {
    channel_optout: ["sms"],
    quiet_hours: { start: "22:00", end: "07:00", tz: "UTC" },
    rate_cap_per_day: 5,
    device_tokens: [{ endpoint: "https://push.example.com/x" }],
    locale: "fr",
  });
  const cleared = await patchPreferences(database, "p2", { quiet_hours: null, locale: null, channel_optout: [] }, []);
  t.match(cleared, { quiet_hours: null, locale: null, channel_optout: [], rate_cap_per_day: 5 });
});
