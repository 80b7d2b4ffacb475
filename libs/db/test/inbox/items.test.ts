import { freshDatabase, seedNotification } from "@notify/testing";
import t from "tap";
import { storeInboxItem } from "../../src/delivery/in-app.js";
import {
  inboxItemsSince,
  latestInboxItemId,
  listenForInboxItems,
  listInboxItems,
  listInboxItemsAfter,
  setInboxItemState,
} from "../../src/inbox/items.js";

// The inbox's items as its API reads them: seen and read keep their first time, filters select
// by state, a stored item wakes the listener of its user, and one statement tells a poller which
// users got items.
const { database } = await freshDatabase(t);
const { sql } = database;

/** Stores an in-app item of a notification of `client` (the row the worker's item comes from). */
const store = async (userId: string, n: number, client = "c1") => {
  const id = `n-${client}-${userId}-${n}`;
  await seedNotification(database, { id, clientId: client, userId });
  return storeInboxItem(sql, { userId, notificationId: id, category: "c", title: null, body: `b${n}` });
};
const owner = (userId: string, clientId = "c1") => ({ userId, clientId });

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

t.test("a stream reading after the last id it sent passes over no item of its user", async (t) => {
  // Two stores of one user's items at once: the first takes its id and commits late (its
  // transaction still open), the second takes the next id. A stream reads the ids after the
  // last it sent, so an item committed after a higher one was read would never reach it.
  const user = "racing-user";
  await seedNotification(database, { id: "n-race-1", clientId: "c1", userId: user });
  await seedNotification(database, { id: "n-race-2", clientId: "c1", userId: user });
  const reserved = await sql.reserve();
  t.teardown(() => reserved.release());
  await reserved`begin`;
  const first = await storeInboxItem(reserved, {
    userId: user,
    notificationId: "n-race-1",
    category: "c",
    title: null,
    body: "first",
  });
  const second = storeInboxItem(sql, {
    userId: user,
    notificationId: "n-race-2",
    category: "c",
    title: null,
    body: "second",
  });
  await new Promise((resolve) => setTimeout(resolve, 300));

  // The stream, as it reads: the items after the last id it sent, that id moving to the last read.
  const sent: number[] = [];
  const read = async () => {
    for (const item of await listInboxItemsAfter(database, owner(user), sent.at(-1) ?? 0, 10))
      sent.push(Number(item.id));
  };
  await read();
  await reserved`commit`;
  const secondId = await second;
  await read();
  t.same(
    sent,
    [first, secondId].sort((a, b) => a - b),
    "every item, each once, in id order",
  );
});
