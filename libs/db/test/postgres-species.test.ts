import { execFile } from "node:child_process";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { createDb } from "../src/index.js";

// postgres.js 3.4.9 declares `static get [Symbol.species]()` on Query (a Promise) and Result (an
// Array). V8 never keeps an optimized constructor of a builtin's subclass with a species getter:
// each compile is aborted ("dependency change") and started again once the function is hot, for
// as long as the process runs (in ingest under load: 100-200 aborted compiles of Query and more of
// Result a minute, each a few milliseconds of a core, and the constructors left unoptimized).
// patches/postgres+3.4.9.patch declares the same species as a data property. These tests fail on
// the library as published.
const { url } = await freshDatabase(t);
const database = createDb({ url, max: 2 });
t.teardown(() => database.close());

t.test("Query and Result name their species with a data property, not a getter", async (t) => {
  const query = database.sql`select 1::int as x`;
  const Query = query.constructor;
  const rows = await query;
  const Result = rows.constructor;
  for (const [Class, species] of [
    [Query, Promise],
    [Result, Array],
  ] as const) {
    const descriptor = Object.getOwnPropertyDescriptor(Class, Symbol.species);
    t.equal(descriptor?.get, undefined, `${Class.name}: no species getter`);
    t.equal(descriptor?.value, species, `${Class.name}: species ${species.name}`);
  }
});

t.test("what the species decides is unchanged: derived arrays and promises are plain ones", async (t) => {
  const rows = await database.sql`select x from generate_series(1, 3) x`;
  t.equal(rows.count, 3, "the result keeps its count");
  const mapped = rows.map((row) => row.x);
  t.equal(Object.getPrototypeOf(mapped), Array.prototype, "map answers an Array");
  t.same(mapped, [1, 2, 3]);
  const chained = database.sql`select 1 as x`.then((r) => r[0]?.x);
  t.equal(Object.getPrototypeOf(chained), Promise.prototype, "then answers a Promise");
  t.equal(await chained, 1);
});

t.test("the query path's constructors are optimized once, not over and over", async (t) => {
  // A process of its own with V8's optimization trace: queries for two seconds, then the count of
  // aborted optimizations of Query and Result (hundreds with the published library).
  const script = `
    import postgres from "postgres";
    const sql = postgres(process.env.URL, { max: 2, onnotice: () => {} });
    const until = Date.now() + 2000;
    while (Date.now() < until) {
      const batch = [];
      for (let i = 0; i < 50; i++) batch.push(sql\`select \${i}::int as x\`.then((rows) => rows.map((r) => r.x)));
      await Promise.all(batch);
    }
    await sql.end();`;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--trace-opt", "--input-type=module", "--eval", script],
    { cwd: dirname(fileURLToPath(import.meta.url)), env: { ...process.env, URL: url }, maxBuffer: 64 * 1024 * 1024 },
  );
  const aborted = (name: string) =>
    stdout.split("\n").filter((line) => line.startsWith("[aborted optimizing") && line.includes(`<JSFunction ${name} `))
      .length;
  t.ok(stdout.includes("[completed optimizing"), "the trace is on");
  t.ok(aborted("Query") <= 2, `aborted compiles of Query: ${aborted("Query")}`);
  t.ok(aborted("Result") <= 2, `aborted compiles of Result: ${aborted("Result")}`);
});
