import fc from "fast-check";
import t from "tap";
import { AppError, MAX_MEMBER_LINE_BYTES, memberBatches, parseMemberLine } from "../src/index.js";

const userIds = fc.array(fc.stringMatching(/^[\x21-\x7e]{1,40}$/), { maxLength: 300 });

async function collect(chunks: Array<Uint8Array | string>, format: "ndjson" | "csv", size = 7) {
  const batches: string[][] = [];
  for await (const batch of memberBatches(chunks, format, size)) batches.push(batch);
  return batches;
}

/** Splits bytes at arbitrary points, through multi-byte characters and line ends alike. */
const split = (bytes: Uint8Array, cuts: number[]) => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    parts.push(bytes.subarray(from, point));
    from = point;
  }
  return parts;
};

t.test("every member comes out once, in order, in batches, however the bytes are split", async (t) => {
  await fc.assert(
    fc.asyncProperty(userIds, fc.array(fc.nat()), fc.boolean(), async (ids, cuts, csv) => {
      const text = csv
        ? `user_id,name\n${ids.map((id) => `"${id.replaceAll('"', '""')}",x é\r\n`).join("")}`
        : `${ids.map((id) => JSON.stringify(id.length % 2 ? id : { user_id: id, name: "é" })).join("\n")}\n\n`;
      const batches = await collect(split(new TextEncoder().encode(text), cuts), csv ? "csv" : "ndjson");
      t.same(batches.flat(), ids);
      for (const batch of batches.slice(0, -1)) t.equal(batch.length, 7);
    }),
    { numRuns: 200 },
  );
});

t.test("a bad line is refused by number", async (t) => {
  const refused = async (text: string, format: "ndjson" | "csv") => {
    try {
      await collect([text], format);
      return null;
    } catch (error) {
      t.ok(error instanceof AppError && error.code === "validation_failed");
      return (error as Error).message;
    }
  };
  t.match(await refused('"a"\n{oops\n', "ndjson"), /^line 2: not JSON/);
  t.match(await refused('"a"\n"has space"\n', "ndjson"), /^line 2: user_id/);
  t.match(await refused("{}\n", "ndjson"), /^line 1: user_id/);
  t.match(await refused('a\n"b\n', "csv"), /^line 2: unterminated/);
  t.match(await refused('"a"b,c\n', "csv"), /^line 1: text after/);
  t.match(await refused(`${"a".repeat(MAX_MEMBER_LINE_BYTES + 1)}`, "csv"), /longer than/);
  t.match(await refused("x".repeat(257), "csv"), /^line 1: user_id/);
  t.equal(parseMemberLine("user_id", "csv", 2), "user_id", "a header only on the first line");
  t.equal(parseMemberLine("  ", "csv", 3), null);
});

const quoted = (field: string) => `"${field.replaceAll('"', '""')}"`;

t.test("CSV is read as RFC 4180: quoted line breaks, commas and quotes, a BOM, CRLF", async (t) => {
  const text = `\ufeffuser_id,note\r\nplain,"a note\nover two lines, with ""quotes"""\r\n"q""uote,d",y\r\n\r\n  \r\nlast`;
  t.same((await collect([text], "csv", 100)).flat(), ["plain", 'q"uote,d', "last"]);
  await t.rejects(
    collect(['a\n"multi\nline",x\n'], "csv"),
    { message: /^line 3: user_id/ },
    "a line break inside a user id is refused at its record",
  );
});

t.test("any CSV whose other fields hold line breaks, commas and quotes yields its ids, however split", async (t) => {
  const note = fc.string({ unit: fc.constantFrom("a", "é", ",", '"', "\n", "\r\n", " "), maxLength: 12 });
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(fc.stringMatching(/^[\x21-\x7e]{1,20}$/), note), { maxLength: 60 }),
      fc.array(fc.nat()),
      async (rows, cuts) => {
        const text = rows.map(([id, n]) => `${quoted(id)},${quoted(n)}\r\n`).join("");
        const ids = rows.map(([id]) => id).filter((id, i) => i > 0 || id !== "user_id");
        t.same((await collect(split(new TextEncoder().encode(text), cuts), "csv")).flat(), ids);
      },
    ),
    { numRuns: 200 },
  );
});
