import { isAppError } from "@notify/core";
import { countingDatabase, freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import {
  addSuppressions,
  listSuppressions,
  type NewSuppression,
  putSuppression,
  removeSuppression,
  type SuppressionEntry,
  suppressionsOf,
} from "../src/index.js";

// The suppression list's statements against the real PostgreSQL: the first entry is kept, a
// client reads its own entries and those that hold for every client (never another client's),
// and the list pages through every entry once, newest first, with cursors bound to their filters.
const { database, url } = await freshDatabase(t);
const { sql } = database;

const entry = (over: Partial<NewSuppression> = {}): NewSuppression => ({
  channel: "email",
  address: "ada@example.com",
  client_id: "shop",
  reason: "manual",
  source: { key_id: "key_1" },
  ...over,
});

const keyOf = (e: Pick<SuppressionEntry, "channel" | "address" | "client_id">) =>
  `${e.channel}|${e.address}|${e.client_id}`;

t.test("adding keeps the first entry and counts only what it added", async (t) => {
  const first = entry({ address: "first@example.com", reason: "hard_bounce", source: { provider: "sendgrid" } });
  t.equal(await addSuppressions(database, [first]), 1);
  t.equal(
    await addSuppressions(database, [
      { ...first, reason: "manual", source: { note: "again" } },
      entry({ address: "first@example.com", client_id: "" }),
    ]),
    1,
    "the same key is left alone; the every-client entry is another key",
  );
  const [row] = await sql<SuppressionEntry[]>`
    select * from suppressions where address = 'first@example.com' and client_id = 'shop'`;
  t.equal(row?.reason, "hard_bounce");
  t.same(row?.source, { provider: "sendgrid" });
  t.equal(await addSuppressions(database, []), 0);
});

t.test("putting one entry from many callers at once: one adds it, every one gets it", async (t) => {
  const put = (i: number) =>
    putSuppression(database, entry({ address: "race@example.com", reason: i === 0 ? "hard_bounce" : "manual" }));
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => put(i)));
  t.equal(answers.filter((a) => a.added).length, 1, "exactly one call added it");
  const reasons = new Set(answers.map((a) => a.entry.reason));
  t.equal(reasons.size, 1, "every caller sees the same, first, entry");
  t.ok(answers.every((a) => a.entry.address === "race@example.com" && a.entry.created_at instanceof Date));
  t.same(answers[0]?.entry.source, { key_id: "key_1" }, "its source, as an object");
  const again = await putSuppression(database, entry({ address: "race@example.com", reason: "unsubscribe" }));
  t.equal(again.added, false);
  t.equal(again.entry.reason, answers[0]?.entry.reason, "a later put changes nothing");
});

t.test("removing takes one client's entry only", async (t) => {
  await addSuppressions(database, [
    entry({ address: "gone@example.com" }),
    entry({ address: "gone@example.com", client_id: "other" }),
    entry({ address: "gone@example.com", client_id: "" }),
  ]);
  t.equal(await removeSuppression(database, "email", "gone@example.com", "shop"), true);
  t.equal(await removeSuppression(database, "email", "gone@example.com", "shop"), false, "already gone");
  t.equal(await removeSuppression(database, "sms", "gone@example.com", "other"), false, "another channel");
  const left = await sql<{ client_id: string }[]>`
    select client_id from suppressions where address = 'gone@example.com' order by client_id`;
  t.same(
    left.map((r) => r.client_id),
    ["", "other"],
  );
});

t.test("suppressionsOf: the client's own and every client's entries for the pairs, in one statement", async (t) => {
  await addSuppressions(database, [
    entry({ address: "own@example.com", client_id: "c1" }),
    entry({ address: "all@example.com", client_id: "", reason: "spam_complaint" }),
    entry({ address: "theirs@example.com", client_id: "c2" }),
    entry({ channel: "sms", address: "+15550100", client_id: "", reason: "carrier_opt_out" }),
  ]);
  const counting = await countingDatabase(t, url);
  const found = await suppressionsOf(counting, "c1", [
    { channel: "email", address: "own@example.com" },
    { channel: "email", address: "all@example.com" },
    { channel: "email", address: "theirs@example.com" },
    { channel: "email", address: "+15550100" },
    { channel: "sms", address: "+15550100" },
    { channel: "email", address: "nobody@example.com" },
  ]);
  t.equal(counting.statements(), 1);
  t.same(
    found.map((f) => [f.channel, f.address, f.client_id, f.reason]),
    [
      ["email", "all@example.com", "", "spam_complaint"],
      ["email", "own@example.com", "c1", "manual"],
      ["sms", "+15550100", "", "carrier_opt_out"],
    ],
  );
  t.ok(found[0]?.created_at instanceof Date);
  t.same(await suppressionsOf(database, "c1", []), []);

  const many = Array.from({ length: 1000 }, (_, i) => ({ channel: "email", address: `n${i}@example.com` }));
  many.push({ channel: "email", address: "own@example.com" });
  const before = counting.statements();
  t.equal((await suppressionsOf(counting, "c1", many)).length, 1);
  t.equal(counting.statements() - before, 1, "a thousand pairs are still one statement");
});

t.test("the list: scope, filters and cursors", async (t) => {
  await sql`delete from suppressions`;
  await addSuppressions(database, [
    entry({ address: "a@example.com", client_id: "lc1" }),
    entry({ address: "b@example.com", client_id: "lc2" }),
    entry({ address: "c@example.org", client_id: "", reason: "hard_bounce" }),
    entry({ channel: "sms", address: "+15550111", client_id: "lc1", reason: "unsubscribe" }),
  ]);
  const addresses = async (q: Parameters<typeof listSuppressions>[1]) =>
    (await listSuppressions(database, q)).data.map((e) => e.address).sort();

  t.same(await addresses({ clientId: "lc1", limit: 10 }), ["+15550111", "a@example.com", "c@example.org"]);
  t.same(await addresses({ clientId: null, limit: 10 }), [
    "+15550111",
    "a@example.com",
    "b@example.com",
    "c@example.org",
  ]);
  t.same(await addresses({ clientId: "", limit: 10 }), ["c@example.org"], "'' lists the every-client entries");
  t.same(await addresses({ clientId: "lc1", limit: 10, channel: "sms" }), ["+15550111"]);
  t.same(await addresses({ clientId: "lc1", limit: 10, reason: "hard_bounce" }), ["c@example.org"]);
  t.same(await addresses({ clientId: null, limit: 10, address_prefix: "b@" }), ["b@example.com"]);
  t.same(await addresses({ clientId: null, limit: 10, address_prefix: "%" }), [], "a prefix is no pattern");

  const first = await listSuppressions(database, { clientId: "lc1", limit: 1 });
  t.equal(first.data.length, 1);
  const cursor = first.next_cursor as string;
  t.type(cursor, "string");
  const refused = async (q: Parameters<typeof listSuppressions>[1], why: string) => {
    const error = await listSuppressions(database, q).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(isAppError(error) && error.code === "invalid_cursor", why);
  };
  await refused({ clientId: "lc2", limit: 1, cursor }, "another client's");
  await refused({ clientId: null, limit: 1, cursor }, "the operator's list");
  await refused({ clientId: "lc1", limit: 1, cursor, channel: "email" }, "other filters");
  await refused({ clientId: "lc1", limit: 1, cursor, cursorSecret: "another" }, "another key");
  await refused({ clientId: "lc1", limit: 1, cursor: `${cursor.slice(0, -2)}AA` }, "an edited cursor");
  await refused({ clientId: "lc1", limit: 1, cursor: "not a cursor" }, "not a cursor");
  const second = await listSuppressions(database, { clientId: "lc1", limit: 5, cursor });
  t.equal(second.data.length, 2, "a page may change its size");
  t.equal(second.next_cursor, null);
});

// Keys that sort the same in JavaScript (code units) and in the database's collation: a fixed
// shape whose punctuation falls in the same places.
const channelArb = fc.constantFrom("email", "sms");
const addressArb = fc.integer({ min: 0, max: 40 }).map((n) => `u${String(n).padStart(2, "0")}`);
const clientArb = fc.constantFrom("", "pa", "pb");
// Few distinct instants, microseconds apart: many entries share one, and ties go to the key.
const instantArb = fc.integer({ min: 0, max: 5 });

const compare = (a: SuppressionEntry & { micros: number }, b: SuppressionEntry & { micros: number }) => {
  if (a.micros !== b.micros) return b.micros - a.micros;
  for (const k of ["channel", "address", "client_id"] as const) {
    if (a[k] !== b[k]) return a[k] < b[k] ? 1 : -1;
  }
  return 0;
};

t.test("paging returns every entry that holds exactly once, newest first (fast-check)", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(fc.record({ channel: channelArb, address: addressArb, client_id: clientArb, at: instantArb }), {
        selector: (e) => keyOf(e),
        maxLength: 40,
      }),
      fc.integer({ min: 1, max: 7 }),
      fc.constantFrom<string | null>("pa", null, ""),
      fc.option(channelArb, { nil: undefined }),
      async (rows, limit, clientId, channel) => {
        await sql`delete from suppressions`;
        for (const r of rows) {
          await sql`insert into suppressions (channel, address, client_id, reason, created_at)
            values (${r.channel}, ${r.address}, ${r.client_id}, 'manual',
              timestamptz '2030-01-01 00:00:00+00' + ${r.at}::int * interval '1 microsecond')`;
        }
        const expected = rows
          .filter((r) => clientId === null || r.client_id === clientId || r.client_id === "")
          .filter((r) => channel === undefined || r.channel === channel)
          .map((r) => ({ ...r, micros: r.at, reason: "manual" as const, source: {}, created_at: new Date(0) }))
          .sort(compare)
          .map(keyOf);
        const seen: string[] = [];
        let cursor: string | undefined;
        for (let pages = 0; pages <= rows.length + 1; pages++) {
          const page = await listSuppressions(database, {
            clientId,
            limit,
            ...(channel === undefined ? {} : { channel }),
            ...(cursor === undefined ? {} : { cursor }),
          });
          t.ok(page.data.length <= limit);
          seen.push(...page.data.map(keyOf));
          if (page.next_cursor === null) break;
          t.ok(page.data.length === limit, "a page before the last is full");
          cursor = page.next_cursor;
        }
        t.same(seen, expected);
      },
    ),
    { numRuns: 60 },
  );
});

t.test("a cursor holds a long address of many bytes", async (t) => {
  await sql`delete from suppressions`;
  const address = `${"é".repeat(300)}@example.com`;
  await addSuppressions(database, [
    entry({ address, client_id: "long".repeat(60) }),
    entry({ address: `a${address}`, client_id: "long".repeat(60) }),
  ]);
  const first = await listSuppressions(database, { clientId: "long".repeat(60), limit: 1 });
  const second = await listSuppressions(database, {
    clientId: "long".repeat(60),
    limit: 1,
    cursor: first.next_cursor as string,
  });
  t.equal(second.data.length, 1);
  t.not(second.data[0]?.address, first.data[0]?.address);
});
