import { randomUUID } from "node:crypto";
import { TEST_PG_URL } from "@notify/testing";
import postgres from "postgres";
import t, { type Test } from "tap";
import { boundsLockingAsItStarts, probeIdOrder, serverVersionChanged, withinIds } from "../src/log-keys.js";
import { createDb } from "../src/pool.js";

// withinIds bounds a lookup of the log by the least and the greatest of a batch's ids, found in
// JavaScript when the database orders ids as JavaScript does. A database whose collation orders
// them otherwise (Danish reads "aa" as one letter, after "z") must still find every row: there
// the bounds are the database's own.

const withDatabase = (url: string, name: string) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

// Two ids JavaScript orders "aa" before "ab", and Danish after.
const [aa, ab] = ["0190aa00-0000-7aa0-8000-000000000000", "0190ab00-0000-7ab0-8000-000000000000"];
const ids = [aa, ab];

async function databaseOf(t: Test, options: string): Promise<postgres.Sql> {
  const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  t.teardown(() => admin.end({ timeout: 1 }));
  const name = `notify_idorder_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin.unsafe(`create database ${name} template template0 ${options}`);
  t.teardown(() => admin.unsafe(`drop database if exists ${name} with (force)`));
  const sql = postgres(withDatabase(TEST_PG_URL, name), { max: 1, onnotice: () => {} });
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`create table log (id text primary key) partition by range (id)`;
  await sql`create table log_low partition of log for values from (minvalue) to ('0190ab00')`;
  await sql`create table log_high partition of log for values from ('0190ab00') to (maxvalue)`;
  await sql`insert into log (id) select unnest(${ids}::text[])`;
  return sql;
}

const found = async (sql: postgres.Sql) =>
  (
    await sql<
      { id: string }[]
    >`select id from log where id = any(${ids}::text[]) and ${withinIds(sql, "id", ids)} order by id collate "C"`
  ).map((r) => r.id);

t.test("a database in C order: the bounds are found in JavaScript, and every row is found", async (t) => {
  const sql = await databaseOf(t, `locale 'C'`);
  t.equal(await probeIdOrder(sql), true, "the probe finds the database orders ids as JavaScript does");
  t.same(await found(sql), ids);
});

// The server's ICU collations, where a database of Danish order can be made.
const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
const [icu] = await admin<{ n: number }[]>`select count(*)::int as n from pg_collation where collprovider = 'i'`;
await admin.end({ timeout: 1 });

t.test(
  "a database in Danish order: the bounds are the database's, and every row is found",
  { skip: (icu?.n ?? 0) === 0 ? "this PostgreSQL has no ICU collations: no Danish database to make" : false },
  async (t) => {
    const sql = await databaseOf(t, `locale 'C' locale_provider icu icu_locale 'da'`);
    const [order] = await sql<
      { sorted: string[] }[]
    >`select array_agg(x order by x) as sorted from unnest(${ids}::text[]) x`;
    t.same(order?.sorted, [...ids].reverse(), "Danish orders these ids otherwise than JavaScript does");
    // The bounds JavaScript would find leave both rows out here.
    const [bounded] = await sql<{ n: number }[]>`
    select count(*)::int as n from log where id between concat(${aa}::text) and concat(${ab}::text)`;
    t.equal(bounded?.n, 0, "bounded by JavaScript's least and greatest, no row is found");
    t.equal(await probeIdOrder(sql), false, "the probe finds the database orders ids otherwise");
    t.same(await found(sql), ids, "withinIds finds every row");
  },
);

t.test("a pool that comes to reach PostgreSQL 18 stops bounding its locking statements as they start", async (t) => {
  const database = createDb({ url: TEST_PG_URL, max: 1 });
  t.teardown(() => database.close());
  const [row] = await database.sql<{ version: number }[]>`select current_setting('server_version_num')::int as version`;
  await probeIdOrder(database.sql);
  const before18 = (row?.version ?? 0) < 180000;
  t.equal(boundsLockingAsItStarts(database.sql), before18, "as its server's version allows, once probed");
  // What postgres.js reports when a connection finds another server behind the address.
  serverVersionChanged(database.sql, "18.4");
  t.notOk(boundsLockingAsItStarts(database.sql), "told of an 18, at once");
});
