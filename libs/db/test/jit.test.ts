import { countingDatabase, freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { createDb, listDueDeferrals } from "../src/index.js";

// The service's statements read and write a few rows by key, but over the partitioned log each
// lookup by key is planned against every partition, which puts the estimated cost of a plain
// poll past jit_above_cost. With PostgreSQL's default (jit on) the server then compiles the
// statement's expressions before running it: tens of milliseconds on a fresh database, over a
// second with a month of daily partitions, for a poll that finds nothing. The service's
// connections turn JIT off.
const { url } = await freshDatabase(t);

// The release loop's poll of due deferrals, on an empty table, as listDueDeferrals sends it.
const poll = await (async () => {
  let captured: { query: string; parameters: readonly unknown[] } | undefined;
  const counting = await countingDatabase(t, url, (query, parameters) => {
    captured = { query, parameters };
  });
  await listDueDeferrals(counting, new Date(), 500);
  await counting.close();
  if (!captured) throw new Error("listDueDeferrals sent no statement");
  return captured;
})();
const plansJit = async (sql: postgres.Sql) => {
  const [row] = await sql.unsafe<Array<{ "QUERY PLAN": unknown }>>(
    `explain (format json) ${poll.query}`,
    poll.parameters as postgres.ParameterOrJSON<never>[],
  );
  return JSON.stringify(row?.["QUERY PLAN"]).includes('"JIT"');
};

t.test("a poll over the partitioned log is run without JIT compilation", async (t) => {
  const raw = postgres(url, { max: 1, onnotice: () => {} });
  const database = createDb({ url, max: 1 });
  t.teardown(async () => {
    await raw.end({ timeout: 2 });
    await database.close();
  });
  const [server] = await raw<Array<{ available: boolean }>>`select pg_jit_available() as available`;
  // Where the server can compile, it would for this statement at its defaults: the cost is real.
  if (server?.available) t.ok(await plansJit(raw), "at the server's defaults the poll is planned with JIT");
  else t.comment("this server has no JIT provider: only the setting is checked");
  t.notOk(await plansJit(database.sql), "on the service's connections the poll is planned without JIT");
  const [setting] = await database.sql<Array<{ jit: string }>>`select current_setting('jit') as jit`;
  t.equal(setting?.jit, "off", "the service's connections have jit off");
});
