import fc from "fast-check";
import t from "tap";
import { type CsvRecord, csvCells, csvLine, csvRecords, guardCell, unguardCell } from "../src/csv.js";

// The CSV of `notify suppressions export` and `import`: RFC 4180 written and read back, the
// formula guard undone on reading, and a bad record costing its own line only.

/** Cells built from the characters CSV treats specially, and a few others (é: two UTF-8 bytes, 😀: four). */
const cell = fc.string({
  unit: fc.constantFrom("a", "Z", "1", " ", ",", '"', "'", "\n", "\r", "\r\n", "=", "+", "-", "@", "\t", "é", "😀"),
  maxLength: 10,
});
const record = fc.array(cell, { minLength: 1, maxLength: 6 });

/** The text cut into byte chunks at the given points (multi-byte characters split too). */
function chunked(text: string, cuts: number[]): Uint8Array[] {
  const bytes = new TextEncoder().encode(text);
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(bytes.subarray(from, point));
    from = point;
  }
  return chunks;
}

async function read(chunks: Iterable<Uint8Array | string>, maxRecord?: number): Promise<CsvRecord[]> {
  const records: CsvRecord[] = [];
  for await (const r of csvRecords(chunks, maxRecord)) records.push(r);
  return records;
}

const cellsOf = (records: CsvRecord[]) => records.map((r) => ("cells" in r ? r.cells.map(unguardCell) : r.error));

t.test("what csvLine writes reads back cell for cell, however the bytes are cut", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(record, { maxLength: 20 }), fc.array(fc.nat()), async (records, cuts) => {
      const text = records.map(csvLine).join("");
      const read_ = await read(chunked(text, cuts));
      t.same(cellsOf(read_), records);
      // Each record starts on the line after the previous one's last.
      let line = 1;
      for (const [i, r] of read_.entries()) {
        t.equal(r.line, line);
        line = r.lastLine + 1;
        t.equal(r.lastLine - r.line, (csvLine(records[i] ?? []).match(/\n/g)?.length ?? 1) - 1);
      }
    }),
    { numRuns: 300 },
  );
});

t.test("the formula guard: a quote before = + - @ (and tab, CR), taken off on reading", async (t) => {
  for (const formula of ["=1+2", "+1", "-2", "@SUM(A1)", "\tx", "\r=x"]) {
    t.equal(guardCell(formula), `'${formula}`);
    t.notMatch(csvLine([formula]).replace(/^"/, ""), /^[=+\-@\t\r]/, `${JSON.stringify(formula)} is guarded`);
  }
  t.equal(csvLine(['=HYPERLINK("http://x")', "a"]), `"'=HYPERLINK(""http://x"")",a\r\n`);
  t.equal(guardCell("a=b"), "a=b", "only at the start");
  t.equal(guardCell("'abc"), "'abc", "a quote before no formula is left alone");
  await fc.assert(
    fc.property(cell, (c) => {
      t.equal(unguardCell(guardCell(c)), c, "reading undoes the guard exactly");
      t.notMatch(guardCell(c), /^[=+\-@\t\r]/, "no written cell starts a formula");
    }),
  );
});

t.test("RFC 4180 as other writers write it: quotes where not needed, LF or CRLF, a BOM", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(fc.tuple(cell, fc.boolean()), { minLength: 1, maxLength: 5 }), { maxLength: 10 }),
      fc.constantFrom("\n", "\r\n"),
      fc.boolean(),
      async (rows, eol, bom) => {
        // A cell is quoted when it needs to be or when the writer chose to.
        const text = rows
          .map((cells) =>
            cells
              .map(([c, quote]) =>
                quote || /[",\r\n]/.test(c) || cells.length === 1 ? `"${c.replaceAll('"', '""')}"` : c,
              )
              .join(","),
          )
          .map((line) => `${line}${eol}`)
          .join("");
        const records = await read([`${bom ? "\uFEFF" : ""}${text}`]);
        t.same(
          records.map((r) => ("cells" in r ? r.cells : r.error)),
          rows.map((cells) => cells.map(([c]) => c)),
        );
      },
    ),
    { numRuns: 200 },
  );
});

t.test("a bad line among good ones is reported by its number and costs nothing else", async (t) => {
  const plain = fc.string({ unit: fc.constantFrom("a", "b", "@", " ", ",", '"', "é"), maxLength: 8 });
  const bad = fc.constantFrom('a"b,c', '"a"b,c', '"unterminated,x', 'x,"y"z', "\uFFFD,x");
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(plain, { minLength: 2, maxLength: 4 }), { maxLength: 12 }),
      fc.nat(),
      bad,
      fc.array(fc.nat()),
      async (good, at, badLine, cuts) => {
        const lines = good.map((cells) => csvLine(cells).slice(0, -2));
        const position = at % (lines.length + 1);
        lines.splice(position, 0, badLine);
        const records = await read(chunked(lines.map((l) => `${l}\r\n`).join(""), cuts), 64);
        const errors = records.filter((r) => "error" in r);
        t.same(
          errors.map((r) => r.line),
          [position + 1],
          "one error, on the bad line",
        );
        const read_ = records.filter((r) => "cells" in r);
        t.same(cellsOf(read_), good, "every good line read");
        t.same(
          read_.map((r) => r.line),
          good.map((_, i) => (i < position ? i + 1 : i + 2)),
          "each with its line number",
        );
      },
    ),
    { numRuns: 300 },
  );
});

t.test("examples: the cells of one record, and what is refused", async (t) => {
  t.same(csvCells("a,b,,c"), ["a", "b", "", "c"]);
  t.same(csvCells('"a,b","c""d",'), ["a,b", 'c"d', ""]);
  t.same(csvCells('""'), [""]);
  t.equal(csvCells('"a"b'), "text after a closing quote");
  t.match(csvCells('a"b'), /a quote inside an unquoted field/);
  const records = await read(['h1,h2\n"x\ny",z\r\n\n"open,1\nq,2\n', "r,3"]);
  t.same(records, [
    { line: 1, lastLine: 1, cells: ["h1", "h2"] },
    { line: 2, lastLine: 3, cells: ["x\ny", "z"] },
    { line: 5, lastLine: 5, error: "unterminated quoted field" },
    { line: 6, lastLine: 6, cells: ["q", "2"] },
    { line: 7, lastLine: 7, cells: ["r", "3"] },
  ]);
  const long = await read([`a,b\n${"x".repeat(100)}`, `${"y".repeat(100)}\nc,d\n`], 64);
  t.same(long, [
    { line: 1, lastLine: 1, cells: ["a", "b"] },
    { line: 2, lastLine: 2, error: "longer than 64 characters" },
    { line: 3, lastLine: 3, cells: ["c", "d"] },
  ]);
  const notUtf8 = await read([new Uint8Array([0x61, 0x2c, 0xff, 0x0a, 0x62, 0x2c, 0x63])]);
  t.same(notUtf8, [
    { line: 1, lastLine: 1, error: "not UTF-8" },
    { line: 2, lastLine: 2, cells: ["b", "c"] },
  ]);
});

t.test("any text: no throw, records in order, line numbers within the text", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.string({ unit: fc.constantFrom("a", ",", '"', "\n", "\r", " "), maxLength: 80 }),
      async (text) => {
        const records = await read([text], 16);
        const lines = text.split("\n").length;
        let previous = 0;
        for (const r of records) {
          t.ok(r.line > previous && r.lastLine >= r.line && r.lastLine <= lines);
          previous = r.lastLine;
        }
      },
    ),
    { numRuns: 500 },
  );
});
