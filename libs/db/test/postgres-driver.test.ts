import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
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

// The library as published writes a query to a connection whose socket is gone (its backend
// terminated, PostgreSQL restarted) from a setImmediate callback, which throws `TypeError: Cannot
// read properties of null (reading 'write')` past every handler and ends the process
// (porsager/postgres#1154, #1208). A reserved connection, or a transaction's, is where it happens:
// the handle keeps the connection after the pool took it back on its close, queues the next
// queries where nothing drains them, and `release()` hands the dead connection to the pool again.
// A cursor's callback that returns after the close writes, and rejects, with the same missing
// socket. The closed session's last query and its error (a terminated backend's 57P01) stay on the
// connection, and the first query of the session opened next fails with that error. The patch
// rejects each query of such a handle with CONNECTION_CLOSED and gives the pool nothing it has
// not already taken back, leaves a cursor whose connection closed alone, and drops what a closed
// session leaves: bytes not yet written, its query and that query's error.
//
// The reproduction runs in a process of its own, which reports uncaught exceptions and unhandled
// rejections instead of ending, and bounds each wait, so that a fault shows as a result here.
t.test("queries on a connection whose backend is gone reject, and the pool goes on", async (t) => {
  const script = `
    import postgres from "postgres";
    const uncaught = [];
    process.on("uncaughtException", (e, origin) => uncaught.push(origin + ": " + (e && e.stack)));
    const url = process.env.URL;
    const killer = postgres(url, { max: 1, onnotice: () => {} });
    const kill = (pid) => killer\`select pg_terminate_backend(\${pid})\`;
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const outcome = (p) => Promise.race([
      Promise.resolve(p).then(() => "ok", (e) => (e && e.code) || String(e)),
      sleep(3000).then(() => "hang"),
    ]);
    // A pool of its own for each case, of one connection: what the dead one leaves behind shows.
    const pool = () => {
      const closes = [];
      const sql = postgres(url, { max: 1, onnotice: () => {}, onclose: (id) => closes.push(id) });
      sql.closed = async () => { for (let i = 0; i < 300 && closes.length === 0; i++) await sleep(10) };
      sql.works = () => Promise.all([1, 2, 3].map((i) => outcome(sql\`select \${i}::int as i\`)));
      return sql;
    };
    const report = {};
    const done = () => {
      report.uncaught = uncaught;
      console.log(JSON.stringify(report));
      process.exit(0);
    };
    // What is left unanswered shows as missing from the report, not as a process that never ends.
    setTimeout(done, 30000);
    const end = (sql) => Promise.race([sql.end({ timeout: 1 }), sleep(3000)]);

    // A reserved connection whose close the pool has seen: a query, then several at once.
    let sql = pool();
    let r = await sql.reserve();
    let [{ pid }] = await r\`select pg_backend_pid() as pid\`;
    await kill(pid);
    await sql.closed();
    report.reservedAfterClose = [await outcome(r\`select 1\`)];
    report.reservedAfterClose.push(...(await Promise.all(
      [r\`select \${1}::int\`, r\`select \${"x".repeat(2000)} as big\`, r\`select 3\`.simple()].map(outcome))));
    r.release();
    report.poolAfterRelease = await sql.works();
    report.reservedAgain = await outcome(sql.reserve().then((r) => r\`select 1\`.finally(r.release)));
    await end(sql);

    // A reserved connection given queries at once, before its close is seen.
    sql = pool();
    r = await sql.reserve();
    [{ pid }] = await r\`select pg_backend_pid() as pid\`;
    await kill(pid);
    report.reservedBeforeClose = await Promise.all([1, 2, 3].map((i) => outcome(r\`select \${i}::int\`)));
    await sql.closed();
    r.release();
    report.poolAfterPipelined = await sql.works();
    await end(sql);

    // A transaction whose connection closes while its callback runs.
    sql = pool();
    let queried;
    const inside = new Promise((resolve) => (queried = resolve));
    report.transaction = await outcome(sql.begin(async (tx) => {
      const [{ pid }] = await tx\`select pg_backend_pid() as pid\`;
      await kill(pid);
      await sql.closed();
      queried(await Promise.all([1, 2].map((i) => outcome(tx\`select \${i}::int\`))));
    }));
    report.transactionQueries = await inside;
    report.poolAfterTransaction = await sql.works();
    await end(sql);

    // A cursor whose connection closes while its callback runs.
    sql = pool();
    [{ pid }] = await sql\`select pg_backend_pid() as pid\`;
    let returned;
    const callback = new Promise((resolve) => (returned = resolve));
    report.cursor = await outcome(sql\`select x from generate_series(1, 10) x\`.cursor(1, async () => {
      await kill(pid);
      await sql.closed();
      setTimeout(returned, 50);
    }));
    await callback;
    report.poolAfterCursor = await sql.works();
    await end(sql);

    // A pool query the server answers with the termination's error just before it closes.
    sql = pool();
    [{ pid }] = await sql\`select pg_backend_pid() as pid\`;
    const sleeping = outcome(sql\`select pg_sleep(2)\`);
    await sleep(200);
    await kill(pid);
    report.terminatedQuery = await sleeping;
    report.poolAfterTerminated = await sql.works();
    await end(sql);

    await end(killer);
    await sleep(100);
    done();`;
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "--eval", script], {
    cwd: dirname(fileURLToPath(import.meta.url)),
    env: { ...process.env, URL: url },
    timeout: 60_000,
  });
  const report = JSON.parse(stdout);
  const closed = ["CONNECTION_CLOSED", "CONNECTION_DESTROYED", "ECONNRESET", "EPIPE", "57P01"];
  const allOk = ["ok", "ok", "ok"];
  t.same(report.uncaught, [], "no uncaught exception and no unhandled rejection");
  t.same(report.reservedAfterClose, Array(4).fill("CONNECTION_CLOSED"), "each query on the reserved handle rejects");
  t.same(report.poolAfterRelease, allOk, "the pool answers once the handle is released");
  t.equal(report.reservedAgain, "ok", "a new reservation answers");
  t.equal(report.reservedBeforeClose?.length, 3, "the queries given at once settle");
  for (const outcome of report.reservedBeforeClose ?? []) t.ok(closed.includes(outcome), `pipelined: ${outcome}`);
  t.same(report.poolAfterPipelined, allOk, "the pool answers after the pipelined queries");
  t.ok(closed.includes(report.transaction), `the transaction rejects: ${report.transaction}`);
  t.same(report.transactionQueries, ["CONNECTION_CLOSED", "CONNECTION_CLOSED"], "its later queries reject");
  t.same(report.poolAfterTransaction, allOk, "the pool answers after the transaction");
  t.ok(closed.includes(report.cursor), `the cursor rejects: ${report.cursor}`);
  t.same(report.poolAfterCursor, allOk, "the pool answers after the cursor");
  t.ok(closed.includes(report.terminatedQuery), `the terminated query rejects: ${report.terminatedQuery}`);
  t.same(report.poolAfterTerminated, allOk, "no later query gets the terminated session's error");
});
