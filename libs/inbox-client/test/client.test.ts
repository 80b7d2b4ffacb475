import { startTestStack } from "@notify/testing";
import t from "tap";
import { createInboxClient, createInboxFeed, InboxApiError, type InboxItem } from "../src/index.js";
import { doubled, service } from "./support.js";

// The client and the feed against the real service (ingest, processor and workers as processes,
// real Postgres and NATS): a caller's backend mints inbox tokens with its API key and sends in-app
// notifications; the user's client lists, marks and changes preferences with the token alone.

const { stack } = await startTestStack(t, { apps: ["ingest", "processor", "workers"] });
const { mint, revokeAll, send, stored, storedCount } = service(stack.baseUrl, stack.apiKey as string);

const ids = (items: InboxItem[]) => items.map((i) => i.id);

t.test("list pages by cursor, newest first, each item once; the feed's pages too", async (t) => {
  const user = "list-user";
  for (let i = 0; i < 7; i++) await send(user, `list-${i}`);
  const all = await storedCount(user, 7);
  const client = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user) });

  const paged: InboxItem[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.list({ limit: 3, ...(cursor === undefined ? {} : { cursor }) });
    paged.push(...page.items);
    t.ok(page.items.length <= 3);
    if (!page.hasMore) {
      t.equal(page.nextCursor, null);
      break;
    }
    cursor = page.nextCursor as string;
  }
  t.same(ids(paged), ids(all), "every item, newest first");
  t.same(doubled(paged), []);
  t.match(paged[0], {
    title: "Welcome",
    body: /^Hello list-\d, thanks for joining\.$/,
    category: "account",
    read_at: null,
  });

  const feed = createInboxFeed(client, { pageSize: 3 });
  await feed.start();
  t.equal(feed.state.items.length, 3);
  t.ok(feed.state.hasMore);
  while (feed.state.hasMore) await feed.loadMore();
  t.same(ids(feed.state.items), ids(all));
  t.same(feed.state.counts, { unread: 7, unseen: 7, total: 7 });
  feed.stop();
});

t.test("marks show at once, then hold the server's answer; counts follow", async (t) => {
  const user = "marks-user";
  for (let i = 0; i < 4; i++) await send(user, `marks-${i}`);
  await storedCount(user, 4);
  const client = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user) });
  const feed = createInboxFeed(client);
  await feed.start();
  const [newest, second, third] = feed.state.items as [InboxItem, InboxItem, InboxItem];
  t.same(feed.state.counts, { unread: 4, unseen: 4, total: 4 });

  const read = feed.markRead(newest.id);
  t.not(feed.state.items[0]?.read_at, null, "read before the server answered");
  t.same(feed.state.counts, { unread: 3, unseen: 4, total: 4 });
  await read;
  const server = (await stored(user)).find((i) => i.id === newest.id);
  t.not(server?.read_at, null);
  t.equal(feed.state.items[0]?.read_at, server?.read_at, "the server's time replaces the client's guess");
  t.same(feed.state.counts, await client.counts());

  const archived = feed.archive(second.id);
  t.notOk(
    feed.state.items.some((i) => i.id === second.id),
    "an archived item leaves the inbox view at once",
  );
  t.same(feed.state.counts, { unread: 2, unseen: 3, total: 3 });
  await archived;
  t.same(await client.counts(), { unread: 2, unseen: 3, total: 3 });
  await feed.archive(second.id, false);
  t.ok(
    feed.state.items.some((i) => i.id === second.id),
    "and comes back when unarchived",
  );

  await feed.markSeen(third.id);
  t.not(feed.state.items.find((i) => i.id === third.id)?.seen_at, null);
  await feed.markRead(newest.id, false);
  t.equal(feed.state.items[0]?.read_at, null);

  const all = feed.markAllRead();
  t.equal(feed.state.counts?.unread, 0, "every item read at once");
  t.ok(feed.state.items.every((i) => i.read_at !== null));
  await all;
  t.same(feed.state.counts, await client.counts());
  t.equal(feed.state.counts?.unread, 0);
  t.ok((await stored(user)).every((i) => i.read_at !== null));
  t.equal(feed.state.error, null);
  feed.stop();
});

t.test("mark-all stops at before_id: a later item keeps its state", async (t) => {
  const user = "mark-all-user";
  for (let i = 0; i < 3; i++) await send(user, `all-${i}`);
  const [newest, middle] = (await storedCount(user, 3)) as [InboxItem, InboxItem];
  const client = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user) });
  const counts = await client.markAll("seen", { beforeId: middle.id });
  t.same(counts, { unread: 3, unseen: 1, total: 3 });
  const after = await stored(user);
  t.equal(after.find((i) => i.id === newest.id)?.seen_at, null);
  t.ok(after.filter((i) => i.id !== newest.id).every((i) => i.seen_at !== null));
  t.same(await client.markAll("archived"), { unread: 0, unseen: 0, total: 0 });
  t.same((await client.list()).items, [], "the inbox view is empty");
  t.equal((await client.list({ filter: "archived" })).items.length, 3);
});

t.test("a mark the server refuses is rolled back, and the error is in the state", async (t) => {
  const user = "rollback-user";
  await send(user, "rollback");
  await storedCount(user, 1);
  const client = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user) });
  const feed = createInboxFeed(client);
  await feed.start();
  const item = feed.state.items[0] as InboxItem;
  // The token stops working: the string cannot be renewed, so the server refuses the mark.
  await revokeAll(user);
  const shown: Array<string | null | undefined> = [];
  feed.subscribe((state) => shown.push(state.items[0]?.read_at));
  await feed.markRead(item.id);
  t.equal(shown.at(-2) !== null, true, "shown read while sent");
  t.equal(feed.state.items[0]?.read_at, null, "rolled back");
  t.same(feed.state.counts, { unread: 1, unseen: 1, total: 1 }, "the counts too");
  t.ok(feed.state.error instanceof InboxApiError);
  t.match(feed.state.error, { status: 401, problem: { code: "unauthenticated" } });
  t.equal((await stored(user))[0]?.read_at, null, "nothing changed on the server");
  feed.stop();
});

t.test("a refused token is renewed once through the function, and the request sent again", async (t) => {
  const user = "renew-user";
  await send(user, "renew");
  await storedCount(user, 1);
  let calls = 0;
  const client = createInboxClient({
    baseUrl: stack.baseUrl,
    token: async () => {
      calls += 1;
      return mint(user);
    },
  });
  t.equal((await client.list()).items.length, 1);
  t.equal(calls, 1, "asked once, then kept");
  await client.counts();
  t.equal(calls, 1);
  await revokeAll(user);
  // Three requests refused at once share one renewal.
  const answers = await Promise.all([client.list(), client.counts(), client.preferences()]);
  t.equal(answers[0].items.length, 1);
  t.equal(calls, 2, "one new token for the three");

  // A function whose tokens are refused each time: one renewal per refusal, then the error.
  let stale = 0;
  const revoked = await mint(user);
  await revokeAll(user);
  const stuck = createInboxClient({
    baseUrl: stack.baseUrl,
    token: () => {
      stale += 1;
      return revoked;
    },
  });
  await t.rejects(stuck.list(), { name: "InboxApiError", status: 401 });
  t.equal(stale, 2, "the first token, and one renewal");
});

t.test("preferences: read with the categories, changed, read back", async (t) => {
  const user = "prefs-user";
  await send(user, "prefs");
  await storedCount(user, 1);
  const client = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user) });
  const before = await client.preferences();
  t.same(before.category_optout, []);
  t.ok(before.categories.some((c) => c.category === "account" && !c.opted_out));
  const changed = await client.updatePreferences({
    category_optout: ["account"],
    quiet_hours: { start: "22:00", end: "07:00", tz: "Europe/London" },
  });
  t.same(changed.category_optout, ["account"]);
  t.ok(changed.categories.some((c) => c.category === "account" && c.opted_out));
  t.same(await client.preferences(), changed);
  const refused = await client.updatePreferences({ channel_optout: ["fax" as never] }).catch((e: unknown) => e);
  t.match(refused, { name: "InboxApiError", status: 400, problem: { code: "validation_failed" } });
});
