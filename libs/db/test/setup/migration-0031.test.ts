import { newId } from "@notify/core";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import t from "tap";
import { recordReceipts } from "../../src/index.js";
import { MIGRATIONS_FOLDER } from "../../src/setup/migrate.js";
import { databaseAt, migrateTo } from "./migrations-support.js";

// Migration 0031 partitions provider receipts, inbox items and broadcast recipients with the
// notification log, each existing table becoming its `_p0` partition with every row it held.
const { url, sql } = await databaseAt(t, 30);

const ROWS = 20_000;
const recent = newId();
// Notifications of 10 days back: UUIDv7 ids of that day (notify_log_bound is 0028's).
await sql`
  create table old_ids as
  select i, substr(notify_log_bound(now() - interval '10 days' + i * interval '1 second'), 1, 14)
    || '7' || lpad(to_hex(i % 4096), 3, '0') || '-8000-' || lpad(to_hex(i), 12, '0') as id
  from generate_series(1, ${ROWS}) i`;
await sql`
  insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, received_at, applied_at)
  select 'sendgrid', 'ev-' || i, 'sg-' || i, 'delivered', null, jsonb_build_object('notification_id', id),
    now() - interval '10 days', now()
  from old_ids`;
// Of the last days (a provider may still post them again): one naming its notification, one naming none.
await sql`
  insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, applied_at)
  values ('sendgrid', 'ev-recent', 'sg-recent', 'delivered', null, ${sql.json({ notification_id: recent, channel: "email" })}, now()),
         ('plivo', 'ev-unnamed', 'pl-unnamed', 'delivered', null, '{}', null)`;
await sql`
  insert into inbox_items (user_id, client_id, notification_id, category, title, body)
  select 'u-' || (i % 100), 'shop', id, 'news', 'Hi', 'Hello' from old_ids`;
await sql`
  insert into broadcast_recipients (broadcast_id, user_id, notification_id)
  select 'b1', 'u-' || i, id from old_ids`;
// And of today: a notification's inbox item and broadcast recipient, past the log's first partition.
const today = newId();
await sql`insert into inbox_items (user_id, client_id, notification_id, category, title, body)
  values ('u-1', 'shop', ${today}, 'news', 'Hi', 'Today')`;
await sql`insert into broadcast_recipients (broadcast_id, user_id, notification_id) values ('b2', 'u-1', ${today})`;
await sql`drop table old_ids`;
const [top] = await sql<{ id: string }[]>`select max(id)::text as id from inbox_items`;
const before = async () => {
  const counts: Record<string, string> = {};
  for (const table of ["provider_receipts", "inbox_items", "broadcast_recipients"])
    counts[table] =
      (
        await sql<
          { rows: string }[]
        >`select md5(string_agg(t::text, ',' order by t::text)) as rows from ${sql(table)} t`
      )[0]?.rows ?? "";
  return counts;
};
const rowsBefore = await before();

await migrateTo(url);

t.test("each table is partitioned with the log, its rows in its first partition", async (t) => {
  for (const table of ["provider_receipts", "inbox_items", "broadcast_recipients"]) {
    const [row] = await sql<{ kind: string; first: number; all: number }[]>`
      select (select relkind::text from pg_class where relname = ${table}) as kind,
        (select count(*)::int from ${sql(table)} where tableoid = ${`${table}_p0`}::regclass) as first,
        (select count(*)::int from ${sql(table)}) as all`;
    t.equal(row?.kind, "p", `${table} is partitioned`);
    t.ok((row?.first ?? 0) >= ROWS, `${table}: ${row?.first} rows in ${table}_p0`);
    const ranges = await sql<{ suffix: string }[]>`
      select p.suffix from notify_log_partitions p where not p.is_default and p.from_id >= (
        select (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']*)''\\)'))[1] from pg_class c
        where c.relname = ${`${table}_p0`})`;
    t.ok(ranges.length >= 7, "the log's ranges from the first partition's end on");
    for (const { suffix } of ranges)
      t.ok((await sql`select to_regclass(${`${table}${suffix}`}) as r`)[0]?.r, `${table}${suffix} made`);
  }
});

t.test("every row is kept as it was", async (t) => {
  const after: Record<string, string> = {};
  for (const table of ["inbox_items", "broadcast_recipients"])
    after[table] =
      (
        await sql<
          { rows: string }[]
        >`select md5(string_agg(t::text, ',' order by t::text)) as rows from ${sql(table)} t`
      )[0]?.rows ?? "";
  // The receipts gain their notification_id column: compared without it.
  after.provider_receipts =
    (
      await sql<{ rows: string }[]>`
    select md5(string_agg(t::text, ',' order by t::text)) as rows
    from (select provider, event_id, provider_id, status, reason, payload, received_at, applied_at from provider_receipts) t`
    )[0]?.rows ?? "";
  t.same(after, rowsBefore);
  const [item] = await sql<
    { part: string }[]
  >`select tableoid::regclass::text as part from inbox_items where notification_id = ${today}`;
  t.equal(
    item?.part,
    "inbox_items_p0",
    "today's item is in the first partition, which ends with the log's range of today",
  );
});

t.test(
  "receipts keep their dedupe: the last days' under their notification (or none, in the default partition)",
  async (t) => {
    const rows = await sql<{ event_id: string; notification_id: string | null; part: string }[]>`
    select event_id, notification_id, tableoid::regclass::text as part from provider_receipts
    where event_id in ('ev-1', 'ev-recent', 'ev-unnamed') order by event_id`;
    t.same(rows, [
      { event_id: "ev-1", notification_id: "", part: "provider_receipts_p0" },
      { event_id: "ev-recent", notification_id: recent, part: "provider_receipts_p0" },
      { event_id: "ev-unnamed", notification_id: null, part: "provider_receipts_default" },
    ]);
    const again = await recordReceipts(sql, [
      {
        provider: "sendgrid",
        eventId: "ev-recent",
        providerId: "sg-recent",
        status: "delivered",
        reason: null,
        payload: { notification_id: recent, channel: "email" },
      },
      {
        provider: "plivo",
        eventId: "ev-unnamed",
        providerId: "pl-unnamed",
        status: "delivered",
        reason: null,
        payload: {},
      },
    ]);
    t.same(again, { stored: 0, duplicates: 2, pending: 0 }, "a provider's retries are duplicates");
  },
);

t.test("the inbox's read trigger is the partitioned table's", async (t) => {
  const triggers = await sql<{ table: string }[]>`
    select tgrelid::regclass::text as table from pg_trigger where tgname = 'webhook_inbox_read'`;
  t.same(triggers, [{ table: "inbox_items" }]);
});

t.test("inbox ids go on from the last one", async (t) => {
  const [row] = await sql<{ id: string }[]>`
    insert into inbox_items (user_id, client_id, notification_id, category, title, body)
    values ('u-1', 'shop', ${newId()}, 'news', 'Hi', 'Hello') returning id::text`;
  t.ok(BigInt(row?.id ?? 0) > BigInt(top?.id ?? 0), `${row?.id} after ${top?.id}`);
});

t.test("a transaction in flight when 0031 starts only waits: it is not cancelled, nor is the migration", async (t) => {
  const { url: busyUrl, sql: busy } = await databaseAt(t, 30);
  const migrator = postgres(busyUrl, { max: 1, onnotice: () => {} });
  const item = newId();
  await busy`insert into inbox_items (user_id, client_id, notification_id, category, title, body)
    values ('u-1', 'shop', ${item}, 'news', 'Hi', 'Hello')`;
  // A transaction that holds the inbox (a read mark) and then writes a receipt: had the migration
  // taken the receipts and waited for the inbox, the two would wait for each other.
  let migrated = false;
  let migration: Promise<void> = Promise.resolve();
  await busy.begin(async (tx) => {
    await tx`update inbox_items set read_at = now() where notification_id = ${item}`;
    migration = migrate(drizzle(migrator), { migrationsFolder: MIGRATIONS_FOLDER }).then(() => {
      migrated = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.notOk(migrated, "the migration waits for the transaction");
    await tx`insert into provider_receipts (provider, event_id, provider_id, status, reason, payload)
      values ('sendgrid', 'ev-busy', 'sg-busy', 'delivered', null, ${tx.json({ notification_id: item })})`;
  });
  await migration;
  await migrator.end();
  t.ok(migrated, "and then runs");
  const [row] = await busy<{ read: boolean; receipt: string | null }[]>`
    select (select read_at is not null from inbox_items where notification_id = ${item}) as read,
      (select notification_id from provider_receipts where event_id = 'ev-busy') as receipt`;
  t.same(row, { read: true, receipt: item }, "the transaction's writes are there, the receipt under its notification");
});
