import { freshDatabase } from "@notify/testing";
import t from "tap";
import {
  countInboxTokenRevocations,
  insertInboxTokenRevocation,
  listInboxTokenRevocations,
  purgeExpiredInboxTokenRevocations,
} from "../../src/inbox/revocations.js";
import { findInboxTokenOwner, insertInboxToken } from "../../src/inbox/tokens.js";

// Revocations are kept until their tokens expire, one row per token and per user, within each
// client's cap.
const { database } = await freshDatabase(t);
const { sql } = database;
const CAP = 100;

const owner = (userId: string, clientId = "c1") => ({ userId, clientId });
const key = async (id: string, client: string, revokedAt: Date | null = null) =>
  sql`insert into api_keys (id, client_id, name, prefix, key_hash, scopes, revoked_at)
    values (${id}, ${client}, ${id}, 'ntf_', ${`hash-${id}`}, ${["inbox"]}, ${revokedAt})`;

t.test("revocations: kept until their tokens expire, read since a time, and a user's opaque tokens go", async (t) => {
  await key("k-rev", "c9");
  await insertInboxToken(database, {
    tokenHash: "h-opaque-rev",
    userId: "u-rev",
    clientId: "c9",
    keyId: "k-rev",
    expiresAt: new Date(Date.now() + 60_000),
  });
  const now = Date.now();
  const later = new Date(now + 86_400_000);
  await insertInboxTokenRevocation(
    database,
    {
      clientId: "c9",
      userId: "u-rev",
      tokenId: "01900000-0000-7000-8000-000000000001",
      revokedAt: new Date(now - 60_000),
      expiresAt: later,
    },
    CAP,
  );
  t.match(
    await findInboxTokenOwner(database, "h-opaque-rev"),
    owner("u-rev", "c9"),
    "one token's revocation leaves it",
  );
  await insertInboxTokenRevocation(
    database,
    {
      clientId: "c9",
      userId: "u-rev",
      tokenId: null,
      revokedAt: new Date(now),
      expiresAt: later,
    },
    CAP,
  );
  t.equal(
    await findInboxTokenOwner(database, "h-opaque-rev"),
    null,
    "revoking all of the user's deletes the opaque one",
  );
  await insertInboxTokenRevocation(
    database,
    {
      clientId: "c9",
      userId: "u-gone",
      tokenId: null,
      revokedAt: new Date(now - 90_000_000),
      expiresAt: new Date(now - 1000),
    },
    CAP,
  );
  t.same(
    (await listInboxTokenRevocations(database)).map((r) => [r.userId, r.tokenId]),
    [
      ["u-rev", "01900000-0000-7000-8000-000000000001"],
      ["u-rev", null],
    ],
    "in force: not the one whose tokens have all expired",
  );
  t.same(
    (await listInboxTokenRevocations(database, new Date(now - 1000))).map((r) => r.tokenId),
    [null],
    "since a time: the ones revoked after it",
  );
  t.equal(await countInboxTokenRevocations(database, "c9"), 3, "the client holds three rows");
  t.equal(await purgeExpiredInboxTokenRevocations(database), 1);
  t.equal((await listInboxTokenRevocations(database)).length, 2);
  t.equal(await countInboxTokenRevocations(database, "c9"), 2, "the purge gives the client its row back");
});

t.test("revocations: one row per token and per user, and a client's cap counted in Postgres", async (t) => {
  const rows = (clientId: string) =>
    sql<{ user_id: string; token_id: string | null; revoked_at: Date }[]>`
      select user_id, token_id, revoked_at from inbox_token_revocations where client_id = ${clientId}
      order by user_id, token_id nulls first`;
  const revoke = (userId: string, tokenId: string | null, revokedAt: Date, perClient = 3, clientId = "c-cap") =>
    insertInboxTokenRevocation(
      database,
      { clientId, userId, tokenId, revokedAt, expiresAt: new Date(revokedAt.getTime() + 86_400_000) },
      perClient,
    );
  const now = Date.now();
  t.equal(await revoke("ann", null, new Date(now - 5000)), "added");
  t.equal(await revoke("ann", null, new Date(now)), "known", "revoking all of ann's again");
  t.equal(await revoke("ann", null, new Date(now - 9000)), "known", "an older one (a slow instance)");
  t.same(
    (await rows("c-cap")).map((r) => [r.user_id, r.token_id, r.revoked_at.getTime()]),
    [["ann", null, now]],
    "one row for the user, moved forward only",
  );
  t.equal(await revoke("ann", "01900000-0000-7000-8000-0000000000a1", new Date(now)), "added");
  t.equal(await revoke("ann", "01900000-0000-7000-8000-0000000000a1", new Date(now + 1)), "known", "again");
  t.equal(await revoke("bob", null, new Date(now)), "added");
  t.equal(await countInboxTokenRevocations(database, "c-cap"), 3);
  t.equal(await revoke("cyd", null, new Date(now)), "full", "a fourth row is beyond the cap of 3");
  t.equal(await revoke("ann", "01900000-0000-7000-8000-0000000000a2", new Date(now)), "full");
  t.equal(await revoke("ann", null, new Date(now + 10)), "known", "a user the client holds takes no new place");
  t.equal(await revoke("ann", "01900000-0000-7000-8000-0000000000a1", new Date(now)), "known");
  t.equal((await rows("c-cap")).length, 3, "nothing stored beyond the cap");
  t.equal(await countInboxTokenRevocations(database, "c-cap"), 3);
  t.equal(await revoke("cyd", null, new Date(now), 3, "c-other"), "added", "another client has its own");

  // Many at once from several instances: the count's row lock lets exactly the cap through.
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      revoke("race", `01900000-0000-7000-8000-${String(i).padStart(12, "0")}`, new Date(now), 25, "c-race"),
    ),
  );
  t.equal(answers.filter((a) => a === "added").length, 25);
  t.equal(answers.filter((a) => a === "full").length, 15);
  t.equal((await rows("c-race")).length, 25);
  t.equal(await countInboxTokenRevocations(database, "c-race"), 25);
});
