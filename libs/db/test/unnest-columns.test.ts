import { freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { unnestColumns } from "../src/batch.js";
import { createDb } from "../src/index.js";

const { url } = await freshDatabase(t);
// One connection: the prepared statements read back below belong to it.
const database = createDb({ url, max: 1 });
t.teardown(() => database.close());
const { sql } = database;

// Text PostgreSQL can store: no NUL (text refuses it) and no lone surrogate (not valid UTF-8).
const storable = fc.string({ unit: "grapheme", maxLength: 12 }).filter((s) => !s.includes("\u0000"));
const row = fc.record({
  label: fc.option(storable, { nil: null }),
  count: fc.option(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { nil: null }),
  at: fc.option(
    fc.date({ min: new Date("1970-01-01T00:00:00Z"), max: new Date("2200-01-01T00:00:00Z"), noInvalidDate: true }),
    { nil: null },
  ),
});

t.test("a batch's columns come back as its rows, in order, nulls and all (fast-check)", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(row, { minLength: 0, maxLength: 20 }), async (rows) => {
      const found = await sql<{ label: string | null; count: number | null; at: Date | null }[]>`
        select label, count, at from ${unnestColumns(sql, "r", {
          label: ["text", rows.map((r) => r.label)],
          count: ["int", rows.map((r) => r.count)],
          at: ["timestamptz", rows.map((r) => r.at?.toISOString() ?? null)],
        })}`;
      t.same(
        found.map((f) => ({ ...f, at: f.at?.toISOString() ?? null })),
        rows.map((r) => ({ ...r, at: r.at?.toISOString() ?? null })),
      );
    }),
    { numRuns: 60 },
  );
});

t.test("every array stays behind a scalar subquery, so the statement keeps one plan", async (t) => {
  const fragment = unnestColumns(sql, "k", { a: ["text", ["x"]], b: ["int", [1]] });
  const [found] = await sql<{ a: string; b: number }[]>`select a, b from ${fragment}`;
  t.same(found, { a: "x", b: 1 });
  const [statement] = await sql<{ statement: string }[]>`
    select statement from pg_prepared_statements where statement like '%as k(a, b)%' and statement not like '%pg_prepared%'`;
  t.match(
    statement?.statement.replace(/\s+/g, " "),
    /unnest\( ?\(select \$1::text\[\]\) ?, \(select \$2::int\[\]\)\) as k\(a, b\)/,
  );
});

t.test("no columns, or a type it does not take, is refused before any statement", async (t) => {
  t.throws(() => unnestColumns(sql, "k", {}), /no columns/);
  const injected = "text[]); drop table notifications; --" as never;
  t.throws(() => unnestColumns(sql, "k", { a: [injected, []] }), /not a column type/);
});

t.test("names that are not plain column names are refused before any statement", async (t) => {
  for (const name of ['a"; drop table notifications; --', "A", "1a", "", "a b"]) {
    t.throws(() => unnestColumns(sql, "k", { [name]: ["text", []] }), /not a plain column name/, name);
    t.throws(() => unnestColumns(sql, name, { a: ["text", []] }), /not a plain column name/, name);
  }
});
