import { countingDatabase, freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import {
  acceptNotifications,
  extendIdempotencyKeys,
  findIdempotencyRecords,
  removeUnpublished,
  retireIdempotencyKeys,
  searchNotificationRecords,
} from "../../src/index.js";
import { acceptedRow as row } from "../support.js";

// The idempotency guard in daily slots (drizzle/0030_idempotency_slots.sql): a claim writes a row
// in each UTC day its window overlaps, a later claim meets it in its own day's slot (across
// midnight too, and while it is being written), a claim past the window takes every row over, and
// days past are dropped as partitions, never deleted row by row.
const { database, url } = await freshDatabase(t);
const { sql } = database;
const DAY_MS = 86_400_000;
await extendIdempotencyKeys(database, { windowHours: 24, marginDays: 3 });

/** The rows of a key, by slot (ISO dates), with the notification each names. */
const rowsOf = async (clientId: string, key: string) =>
  (
    await sql<{ slot: string; notification_id: string; partition: string }[]>`
      select to_char(slot at time zone 'UTC', 'YYYY-MM-DD') as slot, notification_id, tableoid::regclass::text as partition
      from idempotency_keys where client_id = ${clientId} and key = ${key} order by slot`
  ).map((r) => r);

/** The UTC day of the database's clock, `days` from today, as YYYY-MM-DD. */
const dayOf = async (days: number) => {
  const [r] = await sql<{ day: string }[]>`
    select to_char(notify_idempotency_slot(now()) at time zone 'UTC' + make_interval(days => ${days}), 'YYYY-MM-DD') as day`;
  return r?.day as string;
};

/** Writes the rows a claim made at `at` (SQL, a timestamptz) writes, as the accept statement does. */
const claimAt = (tx: postgres.Sql | postgres.TransactionSql, clientId: string, key: string, id: string, at: string) =>
  tx.unsafe(
    `insert into idempotency_keys (client_id, key, slot, request_hash, notification_id, created_at)
     select $1, $2, s, $3, $4, ${at}
     from generate_series(notify_idempotency_slot(${at}), notify_idempotency_slot(${at} + interval '24 hours'), interval '1 day') s`,
    [clientId, key, `hash-${key}`, id],
  );

// A test that needs "a moment before midnight" to be within the window of now waits out the last
// minute of a UTC day rather than straddle two.
const [clock] = await sql<{ left: number }[]>`
  select extract(epoch from notify_idempotency_slot(now()) + interval '1 day' - now())::float8 as left`;
if ((clock?.left ?? DAY_MS) < 60) await new Promise((resolve) => setTimeout(resolve, ((clock?.left ?? 0) + 2) * 1000));

t.test("the slot of a time is the start of its UTC day", async (t) => {
  const [r] = await sql<{ a: Date; b: Date; c: Date }[]>`
    select notify_idempotency_slot('2030-03-01 23:59:59.999+00') as a, notify_idempotency_slot('2030-03-02 00:00:00+00') as b,
      notify_idempotency_slot('2030-03-02 01:30:00+02') as c`;
  t.same(
    [r?.a, r?.b, r?.c].map((d) => d?.toISOString()),
    ["2030-03-01T00:00:00.000Z", "2030-03-02T00:00:00.000Z", "2030-03-01T00:00:00.000Z"],
  );
});

t.test("a claim writes a row in each day its window overlaps, alike but for the slot", async (t) => {
  const first = row("c-spread", "k1");
  const accepted = await acceptNotifications(database, [first], 24);
  t.ok(accepted.inserted.has(first.id));
  const rows = await rowsOf("c-spread", "k1");
  t.same(
    rows.map((r) => [r.slot, r.notification_id, r.partition]),
    [
      [await dayOf(0), first.id, `idempotency_keys_p${(await dayOf(0)).replaceAll("-", "")}`],
      [await dayOf(1), first.id, `idempotency_keys_p${(await dayOf(1)).replaceAll("-", "")}`],
    ],
    "today's and tomorrow's, each in its day's partition",
  );
  const wide = row("c-spread", "k2");
  await acceptNotifications(database, [wide], 72);
  t.same(
    (await rowsOf("c-spread", "k2")).map((r) => r.slot),
    [await dayOf(0), await dayOf(1), await dayOf(2), await dayOf(3)],
    "a 72-hour window: every day it overlaps",
  );
});

t.test("a claim made just before midnight is met by a claim after it, in its own day's slot", async (t) => {
  await claimAt(sql, "c-mid", "k", "n-yesterday", "notify_idempotency_slot(now()) - interval '1 second'");
  t.same(
    (await rowsOf("c-mid", "k")).map((r) => r.slot),
    [await dayOf(-1), await dayOf(0)],
  );
  const again = row("c-mid", "k");
  t.equal((await acceptNotifications(database, [again], 24)).inserted.size, 0, "the key is held");
  const [record] = await findIdempotencyRecords(database, [{ clientId: "c-mid", key: "k" }]);
  t.equal(record?.notification_id, "n-yesterday", "and read from today's slot");
});

t.test("a claim being written across midnight holds the key until it commits", async (t) => {
  for (const outcome of ["commit", "rollback"] as const) {
    const key = `k-${outcome}`;
    const holder = postgres(url, { max: 1, onnotice: () => {} });
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let claimed: Promise<unknown> = Promise.resolve();
    const held = holder
      .begin(async (tx) => {
        await claimAt(tx, "c-race", key, `n-${outcome}`, "notify_idempotency_slot(now()) - interval '1 second'");
        const later = row("c-race", key);
        claimed = acceptNotifications(database, [later], 24).then((batch) => batch.inserted.has(later.id));
        await released;
        if (outcome === "rollback") throw new Error("rolled back");
      })
      .catch(() => {});
    // The later claim waits on the first one's row in today's slot.
    const deadline = Date.now() + 10_000;
    let waits = false;
    while (!waits && Date.now() < deadline) {
      const [waiting] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
      waits = (waiting?.n ?? 0) > 0;
      if (!waits) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    t.ok(waits, `${outcome}: the later claim waits for the first`);
    release();
    await held;
    await holder.end();
    t.equal(
      await claimed,
      outcome === "rollback",
      `${outcome}: the later claim ${outcome === "commit" ? "loses" : "wins"}`,
    );
  }
});

t.test("concurrent claims of one key: exactly one wins", async (t) => {
  for (let i = 0; i < 20; i++) {
    const claims = [row("c-conc", `k${i}`), row("c-conc", `k${i}`), row("c-conc", `k${i}`)];
    const batches = await Promise.all(claims.map((claim) => acceptNotifications(database, [claim], 24)));
    t.equal(batches.filter((b) => b.inserted.size === 1).length, 1, `key ${i}: one winner`);
    const rows = await rowsOf("c-conc", `k${i}`);
    t.equal(new Set(rows.map((r) => r.notification_id)).size, 1, `key ${i}: every slot names the winner`);
  }
});

t.test("a claim that finds a later slot held by a later claim writes nothing", async (t) => {
  // Tomorrow's slot held, today's free: what a claim whose statement started before midnight finds
  // when a claim of the same key that started after midnight got to the shared slot first.
  await sql`
    insert into idempotency_keys (client_id, key, slot, request_hash, notification_id, created_at)
    values ('c-late', 'k', notify_idempotency_slot(now()) + interval '1 day', 'h', 'n-after-midnight', now())`;
  const counting = await countingDatabase(t, url);
  const claim = row("c-late", "k");
  await t.rejects(acceptNotifications(counting, [claim, row("c-late", "other")], 24), { code: "NI030" });
  t.equal(counting.statements(), 3, "the statement ran again (as a later one meets the other claim in its own slot)");
  t.same(
    (await rowsOf("c-late", "k")).map((r) => r.notification_id),
    ["n-after-midnight"],
    "no row of the failed claim",
  );
  t.same(await rowsOf("c-late", "other"), [], "nor of the rest of its batch");
  const [stored] = await sql<{ n: number }[]>`select count(*)::int as n from notifications where id = ${claim.id}`;
  t.equal(stored?.n, 0, "nor its notification");
});

t.test("a key past the window is taken over in every slot", async (t) => {
  await claimAt(sql, "c-old", "k", "n-old", "now() - interval '25 hours'");
  const later = row("c-old", "k");
  t.ok((await acceptNotifications(database, [later], 24)).inserted.has(later.id), "taken over");
  const rows = await rowsOf("c-old", "k");
  const today = await dayOf(0);
  t.same(
    rows.filter((r) => r.slot >= today).map((r) => [r.slot, r.notification_id]),
    [
      [today, later.id],
      [await dayOf(1), later.id],
    ],
    "today's row taken over, tomorrow's written",
  );
  t.ok(await removeUnpublished(database, (await outboxOf(later.id)) as string, [later.id]), "a failed publish");
  t.same(
    (await rowsOf("c-old", "k")).filter((r) => r.notification_id === later.id),
    [],
    "releases every slot's row of its claim",
  );
});

const outboxOf = async (id: string) =>
  (await sql<{ id: string }[]>`select id::text from publish_outbox where ${id} = any(notification_ids)`)[0]?.id;

t.test("a live record of the legacy table holds its key; one past the window does not", async (t) => {
  await sql`
    insert into idempotency_keys_legacy (client_id, key, request_hash, notification_id, created_at)
    values ('c-legacy', 'live', 'hash-live', 'n-live', now() - interval '23 hours'),
           ('c-legacy', 'old', 'hash-old', 'n-old', now() - interval '25 hours')`;
  const live = row("c-legacy", "live");
  const old = row("c-legacy", "old");
  const batch = await acceptNotifications(database, [live, old], 24);
  t.same([...batch.inserted], [old.id], "only the expired one is claimed afresh");
  const records = await findIdempotencyRecords(database, [
    { clientId: "c-legacy", key: "live" },
    { clientId: "c-legacy", key: "old" },
  ]);
  t.same(
    records.map((r) => [r.key, r.notification_id]),
    [
      ["live", "n-live"],
      ["old", old.id],
    ],
    "today's slot first, the legacy record otherwise",
  );
});

t.test("the partitions are made ahead, and dropped a day after their day", async (t) => {
  const fresh = await freshDatabase(t);
  const db = fresh.database;
  const partitions = async () =>
    (
      await db.sql<{ name: string }[]>`
        select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = 'idempotency_keys'::regclass order by 1`
    ).map((r) => r.name);
  const name = (day: string) => `idempotency_keys_p${day.replaceAll("-", "")}`;
  const day = async (days: number) => {
    const [r] = await db.sql<{ day: string }[]>`
      select to_char(notify_idempotency_slot(now()) at time zone 'UTC' + make_interval(days => ${days}), 'YYYY-MM-DD') as day`;
    return r?.day as string;
  };
  // Days behind, as a running deployment has them: made by hand here (the job makes days ahead).
  await db.sql`select notify_idempotency_retire(interval '24 hours')`;
  for (const back of [3, 2, 1]) {
    const d = await day(-back);
    if ((await partitions()).includes(name(d))) continue;
    await db.sql.unsafe(
      `create table ${name(d)} partition of idempotency_keys for values from ('${d} 00:00+00') to ('${d} 00:00+00'::timestamptz + interval '1 day')`,
    );
  }
  await extendIdempotencyKeys(db, { windowHours: 24, marginDays: 3 });
  // A row of a day past the last partition: the default partition takes it until its day is made.
  const beyond = await day(6);
  await db.sql`
    insert into idempotency_keys (client_id, key, slot, request_hash, notification_id)
    values ('c', 'beyond', ${`${beyond} 00:00+00`}, 'h', 'n')`;
  const where = async () =>
    (await db.sql<{ p: string }[]>`select tableoid::regclass::text as p from idempotency_keys where key = 'beyond'`)[0]
      ?.p;
  t.equal(await where(), "idempotency_keys_default");
  t.equal(
    await extendIdempotencyKeys(db, { windowHours: 24, marginDays: 6 }),
    3,
    "three more days made (through day 7)",
  );
  t.equal(await where(), name(beyond), "its day's partition took the row");
  t.same(
    await partitions(),
    [
      ...(await Promise.all([-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7].map(async (n) => name(await day(n))))),
      "idempotency_keys_default",
    ].sort(),
  );
  // Yesterday's partition may still be read by a transaction that started before midnight, for
  // the first hour of today; the days before it by none.
  const [{ early } = { early: false }] = await db.sql<{ early: boolean }[]>`
    select now() < date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' + interval '1 hour' as early`;
  t.equal(await retireIdempotencyKeys(db, 24), early ? 2 : 3, "the days past dropped");
  const left = await partitions();
  t.notOk(left.includes(name(await day(-2))), "the day before yesterday is gone");
  t.equal(left.includes(name(await day(-1))), early, "yesterday's stays for the first hour of today only");
  t.ok(left.includes(name(await day(0))), "today's stays");
  t.equal(await retireIdempotencyKeys(db, 24), 0, "once");
  // A claim and a read after the retirement find every slot they need.
  const claim = row("c-after", "k");
  t.ok((await acceptNotifications(db, [claim], 24)).inserted.has(claim.id));
  t.equal((await findIdempotencyRecords(db, [{ clientId: "c-after", key: "k" }]))[0]?.notification_id, claim.id);
  const [stray] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from idempotency_keys_default where key = 'k'`;
  t.equal(stray?.n, 0, "none of its rows went to the default partition");
});

t.test("the legacy table is emptied once its newest record is past the window and a day", async (t) => {
  const fresh = await freshDatabase(t);
  const db = fresh.database;
  const count = async () =>
    (await db.sql<{ n: number }[]>`select count(*)::int as n from idempotency_keys_legacy`)[0]?.n;
  await db.sql`
    insert into idempotency_keys_legacy (client_id, key, request_hash, notification_id, created_at)
    values ('c', 'a', 'h', 'n1', now() - interval '60 hours'), ('c', 'b', 'h', 'n2', now() - interval '47 hours')`;
  await retireIdempotencyKeys(db, 24);
  t.equal(await count(), 2, "kept while a record is younger than the window and a day");
  await db.sql`update idempotency_keys_legacy set created_at = now() - interval '49 hours' where key = 'b'`;
  await retireIdempotencyKeys(db, 24);
  t.equal(await count(), 0, "emptied after");
});

t.test("the claim's statement deletes no row", async (t) => {
  const one = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(() => one.end());
  const db = { sql: one, close: () => one.end(), ping: async () => true };
  const deleted = async () => {
    await one`select pg_stat_force_next_flush()`;
    await one`select 1`;
    await one`select pg_stat_clear_snapshot()`;
    const [r] = await one<{ n: number }[]>`
      select coalesce(sum(n_tup_del), 0)::int as n from pg_stat_user_tables where relname like 'idempotency\\_keys%'`;
    return r?.n ?? 0;
  };
  const before = await deleted();
  await claimAt(one, "c-nodel", "old", "n-old", "now() - interval '30 hours'");
  for (let i = 0; i < 5; i++) await acceptNotifications(db, [row("c-nodel", `k${i}`), row("c-nodel", "old")], 24);
  t.equal(await deleted(), before, "claims and takeovers update, never delete");
});

t.test("a claim and a read reach only today's slot of 30 days of partitions, on generic plans", async (t) => {
  await sql`select notify_idempotency_extend(now() + interval '30 days')`;
  // Rows in every partition: the same keys claimed on each day.
  await sql`
    insert into idempotency_keys (client_id, key, slot, request_hash, notification_id)
    select 'c-prune', 'k' || i, notify_idempotency_slot(now()) + d * interval '1 day', 'h', 'n' || i
    from generate_series(1, 200) i, generate_series(0, 29) d`;
  await sql`analyze idempotency_keys`;
  interface PlanNode {
    "Relation Name"?: string;
    "Actual Loops"?: number;
    Plans?: PlanNode[];
  }
  const plans: PlanNode[] = [];
  const explained = postgres(url, {
    max: 1,
    onnotice: (notice) => {
      const message = String(notice.message ?? "");
      if (message.startsWith("duration:")) plans.push(JSON.parse(message.slice(message.indexOf("{"))).Plan);
    },
    connection: {
      session_preload_libraries: "auto_explain",
      "auto_explain.log_min_duration": "0",
      "auto_explain.log_analyze": true,
      "auto_explain.log_timing": "off",
      "auto_explain.log_format": "json",
      client_min_messages: "log",
      plan_cache_mode: "force_generic_plan",
    } as Record<string, string | number | boolean>,
  });
  t.teardown(() => explained.end({ timeout: 1 }));
  const db = { sql: explained, close: () => explained.end(), ping: async () => true };
  const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];
  const touched = () => {
    const names = new Set(
      plans
        .flatMap(nodes)
        .filter((n) => (n["Actual Loops"] ?? 0) > 0 && /^idempotency_keys_(p\d|default)/.test(n["Relation Name"] ?? ""))
        .map((n) => n["Relation Name"] as string),
    );
    plans.length = 0;
    return [...names].sort();
  };
  const today = `idempotency_keys_p${(await dayOf(0)).replaceAll("-", "")}`;
  // Twice: the second run is the prepared statement's generic plan.
  for (let i = 0; i < 2; i++) {
    await findIdempotencyRecords(db, [
      { clientId: "c-prune", key: "k1" },
      { clientId: "c-prune", key: "k2" },
    ]);
    t.same(touched(), [today], `a read (run ${i + 1}): today's partition alone`);
    const claim = row("c-prune", `new-${i}`);
    await acceptNotifications(db, [claim, row("c-prune", "k3")], 24);
    t.same(touched(), [], `a claim (run ${i + 1}) reads no partition: it meets a key in its index, on insert`);
    const found = await searchNotificationRecords(db, { clientId: "c-prune", idempotencyKey: `new-${i}`, limit: 10 });
    t.same(
      found.map((n) => n.notification_id),
      [claim.id],
    );
    t.same(touched(), [today], `an operator's lookup by key (run ${i + 1}): today's partition alone`);
  }
});
