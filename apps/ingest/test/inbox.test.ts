import { randomUUID } from "node:crypto";
import { seedApiKey, storeInboxItem } from "@notify/db";
import { listen } from "@notify/http";
import { createInAppProvider, type OutboundMessage } from "@notify/providers";
import { eventually, seedNotification } from "@notify/testing";
import { EventSource } from "eventsource";
import t from "tap";
import { ingestApp } from "./support.js";

// The in-app gateway over a real socket: tokens issued with an API key, the inbox read and
// updated with the user's token, and a real EventSource client receiving and resuming.
const { app, database } = await ingestApp(t);
const server = await listen(app, 0, "127.0.0.1");
t.teardown(() => server.close());
const base = `http://127.0.0.1:${server.port}/api/v1`;
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "shop inbox", scopes: ["inbox"] });
const prefsKey = await seedApiKey(database, { clientId: "shop", name: "shop prefs", scopes: ["preferences"] });
const readKey = await seedApiKey(database, { clientId: "shop", name: "shop reader", scopes: ["read"] });
const otherClientKey = await seedApiKey(database, { clientId: "bank", name: "bank inbox", scopes: ["inbox"] });

const inApp = createInAppProvider({
  store: (m) =>
    storeInboxItem(database.sql, {
      userId: m.to,
      notificationId: m.notificationId,
      category: m.category,
      title: m.subject,
      body: m.body,
    }),
});
/** Delivers in-app a notification of `client` (its row is what the worker's item comes from). */
const deliver = async (userId: string, body = "Hello", overrides: Partial<OutboundMessage> = {}, client = "shop") => {
  const notificationId = overrides.notificationId ?? randomUUID();
  await seedNotification(database, { id: notificationId, clientId: client, userId });
  const result = await inApp.send({
    notificationId,
    channel: "in_app",
    to: userId,
    subject: "Welcome",
    body,
    category: "account",
    priority: "transactional",
    ...overrides,
  });
  if (result.outcome !== "accepted") throw new Error(result.reason);
  return result.providerId;
};

const issue = async (userId: string, key = inboxKey, body?: unknown) =>
  fetch(`${base}/users/${userId}/inbox-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const tokenFor = async (userId: string, key = inboxKey) =>
  ((await (await issue(userId, key)).json()) as { token: string }).token;
const asUser = (token: string, path: string, init: RequestInit = {}) =>
  fetch(`${base}${path}`, {
    ...init,
    headers: { "x-inbox-token": token, ...(init.headers as Record<string, string>) },
  });

interface Item {
  id: string;
  notification_id: string;
  body: string;
  seen_at: string | null;
  read_at: string | null;
  archived_at: string | null;
}

/** A real EventSource client; `lastEventId` stands in for the one it keeps across reconnects. */
function connect(token: string, lastEventId?: string) {
  const events: Item[] = [];
  const source = new EventSource(`${base}/inbox/stream`, {
    fetch: (url, init) =>
      fetch(url, {
        ...init,
        headers: { ...init?.headers, "x-inbox-token": token, ...(lastEventId ? { "last-event-id": lastEventId } : {}) },
      }),
  });
  const ready = new Promise<void>((resolve, reject) => {
    source.addEventListener("ready", () => resolve());
    source.addEventListener("error", (e) => reject(new Error(`stream failed: ${e.message ?? e.code}`)));
  });
  source.addEventListener("notification", (e) => events.push(JSON.parse(e.data) as Item));
  return { source, events, ready };
}

t.test("tokens are issued with an inbox-scoped key only, once, never cached", async (t) => {
  const res = await issue("user-a", inboxKey, { ttl_seconds: 600 });
  t.equal(res.status, 201);
  t.equal(res.headers.get("cache-control"), "no-store");
  const body = (await res.json()) as { token: string; token_id: string; user_id: string; expires_at: string };
  t.match(body, { user_id: "user-a", token: /^ntu_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/, token_id: /^[0-9a-f-]{36}$/ });
  t.equal(Number((await database.sql`select count(*)::int as n from inbox_tokens`)[0]?.n), 0, "nothing is stored");
  t.ok(Math.abs(Date.parse(body.expires_at) - Date.now() - 600_000) < 60_000);
  t.equal((await fetch(`${base}/users/user-a/inbox-tokens`, { method: "POST" })).status, 401);
  t.equal((await issue("user-a", readKey)).status, 403);
  t.equal((await issue("user-a", prefsKey)).status, 403, "the preferences scope does not mint them");
  t.equal((await issue("user-a", inboxKey, { ttl_seconds: 10 })).status, 400);
});

t.test("a token sees only its own client's items of the user, and ends with its key", async (t) => {
  const shopToken = await tokenFor("both");
  const bankToken = await tokenFor("both", otherClientKey);
  await deliver("both", "shop's welcome");
  await deliver("both", "bank's one-time passcode 123456", {}, "bank");
  const bodies = async (token: string) =>
    ((await (await asUser(token, "/inbox?filter=all")).json()) as { data: Item[] }).data.map((i) => i.body);
  t.same(await bodies(shopToken), ["shop's welcome"], "the shop's token never sees the bank's passcode");
  t.same(await bodies(bankToken), ["bank's one-time passcode 123456"]);
  const bankItem = ((await (await asUser(bankToken, "/inbox")).json()) as { data: Item[] }).data[0];
  const patched = await asUser(shopToken, `/inbox/${bankItem?.id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ read: true }),
  });
  t.equal(patched.status, 404, "nor change it");

  const shortLived = await seedApiKey(database, { clientId: "shop", name: "to revoke", scopes: ["inbox"] });
  const token = await tokenFor("both", shortLived);
  t.equal((await asUser(token, "/inbox")).status, 200);
  await database.sql`update api_keys set revoked_at = now() where client_id = 'shop' and name = 'to revoke'`;
  const after = await asUser(token, "/inbox");
  t.equal(after.status, 401, "revoking the key that minted it ends the token at once");
  t.match(await after.json(), { detail: /revoked/ });
});

t.test("the inbox needs a valid user token; an API key is not one", async (t) => {
  const none = await fetch(`${base}/inbox`);
  t.equal(none.status, 401);
  t.match(none.headers.get("www-authenticate"), /^InboxToken/);
  t.equal((await asUser("ntu_forged", "/inbox")).status, 401);
  t.equal((await fetch(`${base}/inbox`, { headers: { authorization: `Bearer ${prefsKey}` } })).status, 401);
  t.equal((await fetch(`${base}/inbox/stream`)).status, 401);
});

t.test("a live stream receives items as delivered and resumes after Last-Event-ID", async (t) => {
  const ada = await tokenFor("ada");
  const bo = await tokenFor("bo");
  await deliver("ada", "before the stream");
  const live = connect(ada);
  const other = connect(bo);
  t.teardown(() => {
    live.source.close();
    other.source.close();
  });
  await Promise.all([live.ready, other.ready]);

  const providerId = await deliver("ada", "first");
  await eventually(async () => (live.events.length === 1 ? true : undefined));
  const [first] = live.events;
  t.equal(providerId, `inbox:${first?.id}`);
  t.equal(first?.body, "first", "a fresh stream starts at what is new");
  live.source.close();

  await deliver("ada", "missed one");
  await deliver("ada", "missed two");
  const resumed = connect(ada, first?.id);
  t.teardown(() => resumed.source.close());
  await resumed.ready;
  await deliver("ada", "live again");
  await eventually(async () => (resumed.events.length === 3 ? true : undefined));
  t.same(
    resumed.events.map((e) => e.body),
    ["missed one", "missed two", "live again"],
  );
  t.same(other.events, [], "another user's stream sees nothing of ada's");

  const bad = await asUser(ada, "/inbox/stream", { headers: { "last-event-id": "abc" } });
  t.equal(bad.status, 400);
});

t.test("a dropped stream reconnects by itself and the client's Last-Event-ID resumes it", async (t) => {
  const token = await tokenFor("fay");
  const stream = connect(token);
  t.teardown(() => stream.source.close());
  await stream.ready;
  await deliver("fay", "before the drop");
  await eventually(async () => (stream.events.length === 1 ? true : undefined));
  // The network drops every connection; the client retries after the stream's `retry` (3 s).
  (server.server as unknown as { closeAllConnections(): void }).closeAllConnections();
  await deliver("fay", "during the drop");
  await eventually(async () => (stream.events.length === 2 ? true : undefined), 15_000, "the resumed stream");
  t.same(
    stream.events.map((e) => e.body),
    ["before the drop", "during the drop"],
  );
});

t.test("the inbox list: cursor pages, filters and states, one user at a time", async (t) => {
  const token = await tokenFor("cy");
  const ids: string[] = [];
  for (const n of [1, 2, 3, 4, 5]) ids.push((await deliver("cy", `item ${n}`)).slice("inbox:".length));
  await deliver("dee", "not cy's");

  const page = async (query: string, as = token) => {
    const res = await asUser(as, `/inbox${query}`);
    return {
      status: res.status,
      body: (await res.json()) as { data: Item[]; next_cursor: string | null; has_more: boolean },
    };
  };
  const first = await page("?limit=2");
  t.same(
    first.body.data.map((i) => i.body),
    ["item 5", "item 4"],
  );
  t.equal(first.body.has_more, true);
  const second = await page(`?limit=2&cursor=${first.body.next_cursor}`);
  t.same(
    second.body.data.map((i) => i.body),
    ["item 3", "item 2"],
  );
  const last = await page(`?limit=2&cursor=${second.body.next_cursor}`);
  t.same(last.body, { data: [last.body.data[0]], next_cursor: null, has_more: false });
  t.equal(last.body.data[0]?.body, "item 1");

  t.equal(
    (await page(`?limit=2&filter=unread&cursor=${first.body.next_cursor}`)).status,
    400,
    "a cursor of another filter",
  );
  t.equal(
    (await page(`?cursor=${first.body.next_cursor}`, await tokenFor("dee"))).status,
    400,
    "a cursor of another user",
  );
  t.equal((await page("?cursor=bm90LWEtY3Vyc29y")).status, 400);
  t.equal((await page("?limit=0")).status, 400);
  t.equal((await page("?limit=-1")).status, 400);
  t.equal((await page("?limit=1000")).body.data.length, 5, "a large page is clamped, not refused");

  const patch = (id: string, body: unknown, as = token) =>
    asUser(as, `/inbox/${id}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const read = (await (await patch(ids[4] as string, { read: true, seen: true })).json()) as Item;
  t.ok(read.read_at && read.seen_at);
  t.equal((await patch(ids[3] as string, { archived: true })).status, 200);
  t.same(
    (await page("?filter=unread")).body.data.map((i) => i.body),
    ["item 3", "item 2", "item 1"],
  );
  t.same(
    (await page("?filter=archived")).body.data.map((i) => i.body),
    ["item 4"],
  );
  t.equal((await page("?filter=all")).body.data.length, 5);
  const unread = (await (await patch(ids[4] as string, { read: false })).json()) as Item;
  t.equal(unread.read_at, null);
  t.ok(unread.seen_at, "clearing read leaves seen");

  t.equal((await patch(ids[0] as string, { read: true }, await tokenFor("dee"))).status, 404, "another user's item");
  t.equal((await patch("999999", { read: true })).status, 404);
  t.equal((await patch(ids[0] as string, {})).status, 400);
  t.equal((await patch(ids[0] as string, { pinned: true })).status, 400);
});

t.test("a redelivered in-app message is stored once", async (t) => {
  const notificationId = randomUUID();
  const a = await deliver("eve", "once", { notificationId });
  const b = await deliver("eve", "once", { notificationId });
  t.equal(a, b);
  const token = await tokenFor("eve");
  t.equal(((await (await asUser(token, "/inbox")).json()) as { data: Item[] }).data.length, 1);
});
