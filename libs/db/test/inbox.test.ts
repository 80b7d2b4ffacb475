import { freshDatabase, seedNotification } from "@notify/testing";
import t from "tap";
import { countInboxTokenRevocations } from "../src/inbox.js";
import {
  findInboxTokenOwner,
  inboxItemsSince,
  insertInboxToken,
  insertInboxTokenRevocation,
  latestInboxItemId,
  listenForInboxItems,
  listInboxItems,
  listInboxItemsAfter,
  listInboxTokenRevocations,
  purgeExpiredInboxTokenRevocations,
  purgeExpiredInboxTokens,
  setInboxItemState,
  storeInboxItem,
} from "../src/index.js";

// The inbox as its API reads it: opaque tokens open one user's items from one client while they
// and the key that minted them last, revocations are kept until their tokens expire, seen and
// read keep their first time, filters select by state, a stored item wakes the listener of its
// user, and one statement tells a poller which users got items.
const { database } = await freshDatabase(t);
const { sql } = database;
const CAP = 100;

/** Stores an in-app item of a notification of `client` (the row the worker's item comes from). */
const store = async (userId: string, n: number, client = "c1") => {
  const id = `n-${client}-${userId}-${n}`;
  await seedNotification(database, { id, clientId: client, userId });
  return storeInboxItem(sql, { userId, notificationId: id, category: "c", title: null, body: `b${n}` });
};
const owner = (userId: string, clientId = "c1") => ({ userId, clientId });
const key = async (id: string, client: string, revokedAt: Date | null = null) =>
  sql`insert into api_keys (id, client_id, name, prefix, key_hash, scopes, revoked_at)
    values (${id}, ${client}, ${id}, 'ntf_', ${`hash-${id}`}, ${["inbox"]}, ${revokedAt})`;

t.test("tokens open their owner while they and their key last", async (t) => {
  await key("k1", "c1");
  await key("k-grace", "c1", new Date(Date.now() + 60_000));
  await key("k-revoked", "c1", new Date(Date.now() - 1000));
  const token = (tokenHash: string, keyId: string, expiresInMs: number) =>
    insertInboxToken(database, {
      tokenHash,
      userId: "u1",
      clientId: "c1",
      keyId,
      expiresAt: new Date(Date.now() + expiresInMs),
    });
  await token("h-live", "k1", 60_000);
  await token("h-old", "k1", -1000);
  await token("h-grace", "k-grace", 60_000);
  await token("h-revoked", "k-revoked", 60_000);
  await token("h-no-key", "k-gone", 60_000);
  t.match(await findInboxTokenOwner(database, "h-live"), { ...owner("u1"), keyId: "k1", expiresAt: Date });
  t.equal(await findInboxTokenOwner(database, "h-old"), null, "expired");
  t.equal(await findInboxTokenOwner(database, "h-none"), null, "unknown");
  t.match(await findInboxTokenOwner(database, "h-grace"), owner("u1"), "its key in a rotation's grace still works");
  t.equal(await findInboxTokenOwner(database, "h-revoked"), null, "its key was revoked");
  t.equal(await findInboxTokenOwner(database, "h-no-key"), null, "its key is gone");
  await sql`insert into inbox_tokens (token_hash, user_id, client_id, expires_at) values ('h-legacy', 'u1', 'c1', now() + interval '1 hour')`;
  t.equal(await findInboxTokenOwner(database, "h-legacy"), null, "a token minted before keys were recorded");

  t.equal(await purgeExpiredInboxTokens(database), 1, "the expired one is purged");
  t.equal(Number((await sql`select count(*)::int as n from inbox_tokens`)[0]?.n), 5, "the others stay");
});

t.test("a user's items from another client are not in this client's inbox", async (t) => {
  const mine = await store("shared-user", 1, "c1");
  const theirs = await store("shared-user", 2, "c2");
  const ids = (items: Array<{ id: string }>) => items.map((i) => Number(i.id));
  t.same(ids((await listInboxItems(database, owner("shared-user", "c1"), "all", 10, null)).items), [mine]);
  t.same(ids((await listInboxItems(database, owner("shared-user", "c2"), "all", 10, null)).items), [theirs]);
  t.same(ids(await listInboxItemsAfter(database, owner("shared-user", "c1"), 0, 10)), [mine], "nor in its stream");
  t.equal(await latestInboxItemId(database, owner("shared-user", "c1")), mine);
  t.equal(
    await setInboxItemState(database, owner("shared-user", "c1"), theirs, { read: true }),
    null,
    "nor can it be changed",
  );
});

t.test("states, filters and paging", async (t) => {
  const ids = [await store("u2", 1), await store("u2", 2), await store("u2", 3)];
  await store("u3", 1);
  t.equal(await latestInboxItemId(database, owner("u2")), ids[2]);
  t.equal(await latestInboxItemId(database, owner("nobody")), 0);

  const read = await setInboxItemState(database, owner("u2"), ids[0] as number, { read: true, seen: true });
  t.type(read?.read_at, "string");
  const again = await setInboxItemState(database, owner("u2"), ids[0] as number, { read: true });
  t.equal(again?.read_at, read?.read_at, "the first read counts");
  t.equal(again?.seen_at, read?.seen_at, "an unmentioned state is kept");
  const cleared = await setInboxItemState(database, owner("u2"), ids[0] as number, { read: false });
  t.equal(cleared?.read_at, null, "false clears");
  t.equal(await setInboxItemState(database, owner("u3"), ids[0] as number, { read: true }), null, "not this user's");
  await setInboxItemState(database, owner("u2"), ids[1] as number, { archived: true });
  await setInboxItemState(database, owner("u2"), ids[2] as number, { read: true });

  const idsOf = (items: Array<{ id: string }>) => items.map((i) => Number(i.id));
  t.same(idsOf((await listInboxItems(database, owner("u2"), "all", 10, null)).items), [ids[2], ids[1], ids[0]]);
  t.same(idsOf((await listInboxItems(database, owner("u2"), "inbox", 10, null)).items), [ids[2], ids[0]]);
  t.same(idsOf((await listInboxItems(database, owner("u2"), "unread", 10, null)).items), [ids[0]]);
  t.same(idsOf((await listInboxItems(database, owner("u2"), "archived", 10, null)).items), [ids[1]]);
  const page = await listInboxItems(database, owner("u2"), "all", 2, null);
  t.equal(page.hasMore, true);
  t.same(idsOf((await listInboxItems(database, owner("u2"), "all", 2, ids[1] as number)).items), [ids[0]]);
  t.same(
    idsOf(await listInboxItemsAfter(database, owner("u2"), ids[0] as number, 10)),
    [ids[1], ids[2]],
    "oldest first",
  );
});

t.test("a stored item wakes its user's listener", async (t) => {
  const woken: string[] = [];
  let wake: () => void = () => {};
  const arrived = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const listening = await listenForInboxItems(database, (userId) => {
    woken.push(userId);
    wake();
  });
  await store("u4", 1);
  await arrived;
  await listening.unlisten();
  t.same(woken, ["u4"]);
});

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

t.test("one statement: the newest item, and which of the users asked about got items after an id", async (t) => {
  const start = await inboxItemsSince(database, null, []);
  const top = start.top ?? 0;
  t.same(start.userIds, []);
  const a = await store("poll-a", 1);
  await store("poll-b", 1);
  const c = await store("poll-c", 1);
  const found = await inboxItemsSince(database, top, ["poll-a", "poll-c", "poll-z"]);
  t.equal(found.top, c);
  t.same(found.userIds.sort(), ["poll-a", "poll-c"], "poll-b is not asked about");
  t.same(await inboxItemsSince(database, c, ["poll-a"]), { top: null, userIds: [] }, "nothing after the newest");
  t.ok(a > top);
});
