import { freshDatabase } from "@notify/testing";
import t from "tap";
import { listContactChanges, writeContacts } from "../../src/index.js";

// Every change of a user's addresses is recorded with the key that made it, whatever writes run
// beside it: a write that puts back the address another write just replaced is a change too.

const { database } = await freshDatabase(t);
const by = { clientId: "shop", keyId: "key-1" };

t.test("concurrent writes: the record matches the order they took", async (t) => {
  const A = { email: "a@example.com", phone: null };
  const B = { email: "b@example.com", phone: null };
  for (let round = 0; round < 40; round++) {
    const user = `race-${round}`;
    await writeContacts(database, user, A, by);
    await Promise.all([writeContacts(database, user, B, by), writeContacts(database, user, A, by)]);
    const [row] = await database.sql<{ email: string }[]>`select email from user_contacts where user_id = ${user}`;
    const changes = (await listContactChanges(database, user, 10)).length - 1;
    // B then A: two changes (A→B, B→A); A then B: one (A→B).
    t.equal(changes, row?.email === A.email ? 2 : 1, `round ${round}: ended at ${row?.email}, ${changes} recorded`);
  }
});
