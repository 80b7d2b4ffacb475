import { freshDatabase } from "@notify/testing";
import t from "tap";
import {
  findInboxTokenUser,
  insertInboxToken,
  latestInboxItemId,
  listenForInboxItems,
  listInboxItems,
  listInboxItemsAfter,
  setInboxItemState,
  storeInboxItem,
} from "../src/index.js";

// The inbox as its API reads it: tokens stop at their expiry, seen and read keep their first
// time, filters select by state, and a stored item wakes the listener of its user.
const { database } = await freshDatabase(t);

const store = (userId: string, n: number) =>
  storeInboxItem(database.sql, {
    userId,
    notificationId: `n-${userId}-${n}`,
    category: "c",
    title: null,
    body: `b${n}`,
  });

t.test("tokens name their user until they expire", async (t) => {
  await insertInboxToken(database, {
    tokenHash: "h-live",
    userId: "u1",
    clientId: "c1",
    expiresAt: new Date(Date.now() + 60_000),
  });
  await insertInboxToken(database, {
    tokenHash: "h-old",
    userId: "u1",
    clientId: "c1",
    expiresAt: new Date(Date.now() - 1000),
  });
  t.equal(await findInboxTokenUser(database, "h-live"), "u1");
  t.equal(await findInboxTokenUser(database, "h-old"), null, "expired");
  t.equal(await findInboxTokenUser(database, "h-none"), null, "unknown");
});

t.test("states, filters and paging", async (t) => {
  const ids = [await store("u2", 1), await store("u2", 2), await store("u2", 3)];
  await store("u3", 1);
  t.equal(await latestInboxItemId(database, "u2"), ids[2]);
  t.equal(await latestInboxItemId(database, "nobody"), 0);

  const read = await setInboxItemState(database, "u2", ids[0] as number, { read: true, seen: true });
  t.type(read?.read_at, "string");
  const again = await setInboxItemState(database, "u2", ids[0] as number, { read: true });
  t.equal(again?.read_at, read?.read_at, "the first read counts");
  t.equal(again?.seen_at, read?.seen_at, "an unmentioned state is kept");
  const cleared = await setInboxItemState(database, "u2", ids[0] as number, { read: false });
  t.equal(cleared?.read_at, null, "false clears");
  t.equal(await setInboxItemState(database, "u3", ids[0] as number, { read: true }), null, "not this user's");
  await setInboxItemState(database, "u2", ids[1] as number, { archived: true });
  await setInboxItemState(database, "u2", ids[2] as number, { read: true });

  const idsOf = (items: Array<{ id: string }>) => items.map((i) => Number(i.id));
  t.same(idsOf((await listInboxItems(database, "u2", "all", 10, null)).items), [ids[2], ids[1], ids[0]]);
  t.same(idsOf((await listInboxItems(database, "u2", "inbox", 10, null)).items), [ids[2], ids[0]]);
  t.same(idsOf((await listInboxItems(database, "u2", "unread", 10, null)).items), [ids[0]]);
  t.same(idsOf((await listInboxItems(database, "u2", "archived", 10, null)).items), [ids[1]]);
  const page = await listInboxItems(database, "u2", "all", 2, null);
  t.equal(page.hasMore, true);
  t.same(idsOf((await listInboxItems(database, "u2", "all", 2, ids[1] as number)).items), [ids[0]]);
  t.same(idsOf(await listInboxItemsAfter(database, "u2", ids[0] as number, 10)), [ids[1], ids[2]], "oldest first");
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
