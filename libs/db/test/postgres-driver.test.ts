import { randomBytes } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { createDb } from "../src/index.js";

// Faults of postgres.js 3.4.9 that patches/postgres+3.4.9.patch mends; each test here fails on
// the library as published.
//
// It reserves a transaction's connection in a hook that runs only while the
// connection could take another pipelined query: a BEGIN written to a connection whose pipeline
// it filled, or whose socket was full, was never reserved. The transaction then failed with
// UNSAFE_TRANSACTION while the server held it open, and the pool handed that connection, idle in
// a transaction, to unrelated queries (porsager/postgres#823, #1189). Under load the webhook
// senders hit it within seconds. patches/postgres+3.4.9.patch reserves the connection whenever
// BEGIN is written.
const { url, database } = await freshDatabase(t);

t.test("a transaction begun on a connection whose pipeline it fills is reserved", async (t) => {
  for (const max_pipeline of [0, 1, 2]) {
    // max_pipeline is an option of postgres.js its types leave out.
    const sql = postgres(url, { max: 3, max_pipeline, onnotice: () => {} } as postgres.Options<{}>);
    try {
      for (let round = 0; round < 5; round++) {
        const busy = [1, 2, 3].map(() => sql`select pg_sleep(0.05)`);
        const plain = Array.from({ length: 6 }, (_, i) => sql`select ${i}::int as i`);
        const transactions = Array.from({ length: 5 }, (_, i) =>
          sql.begin(async (tx) => {
            const [row] = await tx`select ${i}::int as i, txid_current() as txid`;
            const [again] = await tx`select txid_current() as txid`;
            return row?.txid === again?.txid;
          }),
        );
        const results = await Promise.allSettled([...busy, ...plain, ...transactions]);
        const failed = results.filter((r) => r.status === "rejected").map((r) => String(r.reason));
        t.same(failed, [], `max_pipeline ${max_pipeline}, round ${round}: nothing failed`);
        const kept = await Promise.all(transactions);
        t.ok(kept.every(Boolean), "each transaction's statements ran in one transaction");
        const [open] = await sql<Array<{ n: number }>>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and state = 'idle in transaction'`;
        t.equal(open?.n, 0, "no connection was left idle in a transaction");
      }
    } finally {
      await sql.end({ timeout: 2 });
    }
  }
});

// A new connection first reads the database's array types. When that read failed (the pool's
// statement timeout cut it on a loaded server, or the role may not read pg_type), the library left
// its rejection unhandled, which ends a Node.js process, and went on using the connection with
// arrays parsed as text. The patch fails the connection's first query with the reason and closes
// the connection; the pool opens it again for the next query.
t.test("a connection whose array types cannot be read fails its query and is opened again", async (t) => {
  const role = `notify_types_${randomBytes(4).toString("hex")}`;
  await database.sql.unsafe(`create role ${role} login`);
  t.teardown(() => database.sql.unsafe(`drop role if exists ${role}`).catch(() => {}));
  await database.sql`revoke select on pg_catalog.pg_type from public`;
  const asRole = new URL(url);
  asRole.username = role;
  const pool = createDb({ url: asRole.href, max: 1 });
  t.teardown(() => pool.close());

  const failed = await pool.sql`select 1 as one`.catch((error: unknown) => error);
  t.match(failed, { code: "42501" }, "the first query fails with the types read's reason");
  const again = await pool.sql`select 1 as one`.catch((error: unknown) => error);
  t.match(again, { code: "42501" }, "so does the next, on a connection opened again");

  await database.sql`grant select on pg_catalog.pg_type to public`;
  const [row] = await pool.sql<{ tags: string[] }[]>`select array['a', 'b,c']::text[] as tags`;
  t.same(row?.tags, ["a", "b,c"], "once the types can be read, arrays parse as arrays");
});
