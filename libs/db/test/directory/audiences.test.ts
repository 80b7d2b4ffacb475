import { freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import {
  createAudience,
  getAudience,
  importAudienceMembers,
  insertBroadcast,
  listAudiences,
  setAudienceMember,
} from "../../src/index.js";

// An audience's member count is kept on its row (counting millions of members took seconds on
// every broadcast and every read): whatever writes its members, by whichever path, the kept count
// is the number of rows.
const { database } = await freshDatabase(t);
const { sql } = database;

const counted = async (id: string) => {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from audience_members where audience_id = ${id}`;
  return row?.n ?? -1;
};

async function* batchesOf(users: string[], size: number) {
  for (let i = 0; i < users.length; i += size) yield users.slice(i, i + size);
}

const user = fc.integer({ min: 0, max: 40 }).map((n) => `u-${n}`);
const operation = fc.oneof(
  fc.record({
    kind: fc.constant("import" as const),
    users: fc.array(user, { maxLength: 30 }),
    size: fc.integer({ min: 1, max: 8 }),
  }),
  fc.record({ kind: fc.constant("add" as const), user }),
  fc.record({ kind: fc.constant("remove" as const), user }),
  fc.record({ kind: fc.constant("sql insert" as const), users: fc.uniqueArray(user, { maxLength: 10 }) }),
  fc.record({ kind: fc.constant("sql delete" as const), users: fc.array(user, { maxLength: 10 }) }),
  fc.record({ kind: fc.constant("failed import" as const), users: fc.array(user, { minLength: 1, maxLength: 10 }) }),
);

let audiences = 0;
t.test("the kept count is the members' count after any sequence of writes", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(operation, { maxLength: 12 }), async (operations) => {
      const id = `aud-${audiences++}`;
      await createAudience(database, id, id);
      const model = new Set<string>();
      for (const op of operations) {
        if (op.kind === "import") {
          const result = await importAudienceMembers(database, id, batchesOf(op.users, op.size));
          const before = model.size;
          for (const u of op.users) model.add(u);
          if (result?.added !== model.size - before) return false;
        } else if (op.kind === "add" || op.kind === "remove") {
          await setAudienceMember(database, id, op.user, op.kind === "add");
          if (op.kind === "add") model.add(op.user);
          else model.delete(op.user);
        } else if (op.kind === "sql insert") {
          await sql`insert into audience_members (audience_id, user_id)
            select ${id}, u from unnest(${op.users}::text[]) u on conflict do nothing`;
          for (const u of op.users) model.add(u);
        } else if (op.kind === "sql delete") {
          await sql`delete from audience_members where audience_id = ${id} and user_id = any(${op.users}::text[])`;
          for (const u of op.users) model.delete(u);
        } else {
          // An import that fails half-way leaves the audience, and its count, as they were.
          const failing = async function* () {
            yield op.users;
            throw new Error("the upload broke off");
          };
          await importAudienceMembers(database, id, failing()).catch(() => {});
        }
      }
      const audience = await getAudience(database, id);
      return audience?.member_count === model.size && (await counted(id)) === model.size;
    }),
    { numRuns: 60 },
  );
  t.pass("kept counts match");
});

t.test("the list and a broadcast's total read the kept count", async (t) => {
  await createAudience(database, "big", "big");
  await importAudienceMembers(
    database,
    "big",
    batchesOf(
      Array.from({ length: 500 }, (_, i) => `m-${i}`),
      100,
    ),
  );
  const { data } = await listAudiences(database, 1, 200);
  t.equal(data.find((a) => a.id === "big")?.member_count, 500);
  const inserted = await insertBroadcast(database, {
    id: "b-1",
    clientId: "shop",
    idempotencyKey: "k-1",
    requestHash: "h",
    audienceId: "big",
    category: "deals",
    templateId: "promo",
    templateVersion: 1,
    channels: null,
    data: {},
  });
  t.match(inserted, { kind: "inserted", total: 500 });
  // A count kept wrong shows: the total comes from the row, not from counting the members.
  await sql`update audiences set member_count = 7 where id = 'big'`;
  t.equal((await getAudience(database, "big"))?.member_count, 7);
  await sql`update audiences set member_count = 500 where id = 'big'`;
});

t.test("emptying the members table empties every count; deleting an audience takes its members", async (t) => {
  await createAudience(database, "gone", "gone");
  await importAudienceMembers(database, "gone", batchesOf(["a", "b"], 2));
  await sql`delete from audiences where id = 'gone'`;
  t.same(await sql`select 1 from audience_members where audience_id = 'gone'`, []);
  await sql`truncate audience_members`;
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from audiences where member_count <> 0`;
  t.equal(row?.n, 0);
});
