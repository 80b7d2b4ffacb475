import { randomUUID } from "node:crypto";
import { hashKey, newId, signInboxToken } from "@notify/core";
import { loadCredentialKeys, seedApiKey, storeInboxItem } from "@notify/db";
import { eventually, seedNotification } from "@notify/testing";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { countingDatabase, ingestApp, type SseEvent, sseEvents } from "./support.js";

// Inbox streams: each re-checks its credential while open (it ends at the token's expiry, when
// its key is revoked, when it or the user's tokens are revoked), open streams are capped per
// token, per user, per client and per process, and one poller per process feeds them all: N
// open streams cost one statement per poll interval, and an idle stream's keep-alive queries
// nothing.

const base = await ingestApp(t);
const { database, bus } = base;
const adminKey = await seedApiKey(database, { clientId: "shop", name: "admin", scopes: ["admin"] });
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
const keyIdOf = async (key: string) =>
  ((await database.sql`select id from api_keys where key_hash = ${hashKey(key)}`)[0] as { id: string }).id;

type App = Awaited<ReturnType<typeof ingestApp>>["app"];

async function mint(app: App, userId: string, key = inboxKey) {
  const res = await app.request(`/api/v1/users/${userId}/inbox-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
  });
  if (res.status !== 201) throw new Error(`mint: ${res.status} ${await res.text()}`);
  return (await res.json()) as { token: string; token_id: string };
}

/** Opens a stream in-process and reads it as it arrives; `close` is the client going away. */
async function openStream(app: App, token: string) {
  const res = await app.request("/api/v1/inbox/stream", { headers: { "x-inbox-token": token } });
  if (res.status !== 200 || res.body === null) return { res, status: res.status } as const;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let finished = false;
  const ended = (async () => {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    finished = true;
  })();
  const events = (): SseEvent[] => sseEvents(text);
  const stream = {
    res,
    status: 200,
    events,
    ended,
    isFinished: () => finished,
    close: () => reader.cancel().catch(() => {}),
    ready: () => eventually(async () => (events().some((e) => e.event === "ready") ? true : undefined), 5000, "ready"),
  } as const;
  t.teardown(stream.close);
  return stream;
}
type OpenStream = Extract<Awaited<ReturnType<typeof openStream>>, { events: unknown }>;

const opened = (stream: Awaited<ReturnType<typeof openStream>>): OpenStream => {
  if (!("events" in stream)) throw new Error(`the stream answered ${stream.status}`);
  return stream;
};

/** Waits for the stream to end with a token_ended event; answers its reason. */
async function endsWith(stream: OpenStream, within: number) {
  const ended = await Promise.race([
    stream.ended.then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), within)),
  ]);
  if (!ended) return null;
  const last = stream.events().find((e) => e.event === "token_ended");
  return last ? (JSON.parse(last.data ?? "{}") as { reason: string }).reason : "no event";
}

t.test("a stream ends at its token's expiry", async (t) => {
  const keys = await loadCredentialKeys(database);
  const now = Math.floor(Date.now() / 1000);
  const token = signInboxToken(keys, {
    tokenId: newId(),
    userId: "ivy",
    clientId: "shop",
    keyId: await keyIdOf(inboxKey),
    issuedAt: now,
    expiresAt: now + 2,
  });
  const expiresMs = (now + 2) * 1000;
  const stream = opened(await openStream(base.app, token));
  let endedMs = Number.NaN;
  void stream.ended.then(() => {
    endedMs = Date.now();
  });
  await stream.ready();
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresMs - 150 - Date.now())));
  t.notOk(stream.isFinished(), "still open just before the expiry");
  t.equal(await endsWith(stream, 4000), "expired", "token_ended, reason expired, then the end");
  // Timers may fire a millisecond or two early by the wall clock.
  t.ok(endedMs >= expiresMs - 5, `not before the expiry (${endedMs - expiresMs} ms after it)`);
  t.ok(endedMs <= expiresMs + 300, "at the expiry, not a check later");
  t.equal((await base.app.request("/api/v1/inbox/stream", { headers: { "x-inbox-token": token } })).status, 401);
});

t.test("a stream ends after the key that minted its token is revoked", async (t) => {
  // Keys cached for a minute, as in production: the revocation's forget is what ends it.
  const { app } = await ingestApp(t, {
    database,
    bus,
    lookupKey: createKeyLookup(database, 60_000),
    inbox: { recheckMs: 200 },
  });
  const doomed = await seedApiKey(database, { clientId: "shop", name: "doomed", scopes: ["inbox"] });
  const stream = opened(await openStream(app, (await mint(app, "kim", doomed)).token));
  const other = opened(await openStream(app, (await mint(app, "kim")).token));
  await Promise.all([stream.ready(), other.ready()]);
  const revoked = await app.request(`/api/v1/keys/${await keyIdOf(doomed)}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${adminKey}` },
  });
  t.equal(revoked.status, 204);
  t.equal(await endsWith(stream, 2000), "key_revoked");
  t.notOk(other.isFinished(), "a token of another key goes on");
});

t.test("a stream ends at once when its token, or all of its user's tokens, are revoked", async (t) => {
  const { app } = base;
  const one = await mint(app, "lou");
  const two = await mint(app, "lou");
  const first = opened(await openStream(app, one.token));
  const second = opened(await openStream(app, two.token));
  const also = opened(await openStream(app, two.token));
  const bystander = opened(await openStream(app, (await mint(app, "max")).token));
  await Promise.all([first.ready(), second.ready(), also.ready(), bystander.ready()]);
  const del = (path: string) =>
    app.request(`/api/v1/users/lou/inbox-tokens${path}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${inboxKey}` },
    });
  t.equal((await del(`/${one.token_id}`)).status, 204);
  t.equal(await endsWith(first, 500), "revoked", "the token's stream ends");
  t.notOk(second.isFinished(), "the user's other token goes on");
  t.equal((await del("")).status, 204);
  t.equal(await endsWith(second, 500), "revoked", "every stream of the user ends");
  t.equal(await endsWith(also, 500), "revoked");
  t.notOk(bystander.isFinished(), "another user's stream goes on");
  const again = await app.request("/api/v1/inbox/stream", { headers: { "x-inbox-token": two.token } });
  t.equal(again.status, 401, "the client's reconnect is refused");
});

t.test("open streams are capped per token and per user (429) and per process (503)", async (t) => {
  const { app } = await ingestApp(t, {
    database,
    bus,
    inbox: { streamsPerToken: 2, streamsPerUser: 3, streamsPerClient: 10, streamsPerProcess: 5 },
  });
  const a = (await mint(app, "nia")).token;
  const b = (await mint(app, "nia")).token;
  const a1 = opened(await openStream(app, a));
  opened(await openStream(app, a));
  const perToken = await openStream(app, a);
  t.equal(perToken.status, 429, "a third stream of one token");
  t.ok(Number(perToken.res.headers.get("retry-after")) >= 1, "with Retry-After");
  t.match(await perToken.res.json(), { code: "rate_limited", detail: /token/ });
  opened(await openStream(app, b));
  const perUser = await openStream(app, b);
  t.equal(perUser.status, 429, "a fourth stream of one user, over two tokens");
  t.ok(Number(perUser.res.headers.get("retry-after")) >= 1);
  t.match(await perUser.res.json(), { code: "rate_limited", detail: /user/ });
  opened(await openStream(app, (await mint(app, "oz")).token));
  opened(await openStream(app, (await mint(app, "oz")).token));
  const perProcess = await openStream(app, (await mint(app, "pat")).token);
  t.equal(perProcess.status, 503, "a sixth stream in the process");
  t.ok(Number(perProcess.res.headers.get("retry-after")) >= 1);
  t.match(await perProcess.res.json(), { code: "dependency_unavailable" });

  await a1.close();
  await eventually(
    async () => {
      const next = await openStream(app, a);
      if (next.status === 200 && "close" in next) return true;
      return undefined;
    },
    3000,
    "a closed stream's place to free",
  );
});

t.test("a stopping process refuses new streams (503, Retry-After, the connection closed)", async (t) => {
  let stopping = false;
  const { app } = await ingestApp(t, { database, bus, isStopping: () => stopping });
  const token = (await mint(app, "quinn")).token;
  opened(await openStream(app, token));
  stopping = true;
  const refused = await openStream(app, token);
  t.equal(refused.status, 503);
  t.ok(Number(refused.res.headers.get("retry-after")) >= 1, "with Retry-After");
  t.equal(refused.res.headers.get("connection"), "close", "the kept-alive connection is not reused");
  t.match(await refused.res.json(), { code: "dependency_unavailable" });
});

t.test("one client's users cannot take the process's streams from another's (429 per client)", async (t) => {
  const bankKey = await seedApiKey(database, { clientId: "bank", name: "bank inbox", scopes: ["inbox"] });
  const { app } = await ingestApp(t, { database, bus, inbox: { streamsPerProcess: 8 } });
  // Unset, a client's share is a quarter of the process's: 2 of 8.
  const shop = await Promise.all(
    ["sam", "sol"].map(async (user) => opened(await openStream(app, (await mint(app, user)).token))),
  );
  const third = await openStream(app, (await mint(app, "sue")).token);
  t.equal(third.status, 429, "a third user of the client: 429, not the process's 503");
  t.ok(Number(third.res.headers.get("retry-after")) >= 1, "with Retry-After");
  t.match(await third.res.json(), { code: "rate_limited", detail: /client/ });
  const bank = opened(await openStream(app, (await mint(app, "sue", bankKey)).token));
  await bank.ready();
  t.pass("another client's user is served");

  const { app: set } = await ingestApp(t, { database, bus, inbox: { streamsPerClient: 3, streamsPerProcess: 8 } });
  for (const user of ["tam", "tom", "tim"]) opened(await openStream(set, (await mint(set, user)).token));
  t.equal((await openStream(set, (await mint(set, "tem")).token)).status, 429, "INBOX_STREAMS_PER_CLIENT as set");

  await shop[0]?.close();
  await eventually(
    async () => ((await openStream(app, (await mint(app, "sue")).token)).status === 200 ? true : undefined),
    3000,
    "a closed stream's place to free",
  );
});

t.test("one poller feeds every stream: N open streams cost one statement per poll interval", async (t) => {
  const { counter, database: inboxDatabase } = countingDatabase(database);
  const POLL_MS = 250;
  const { app } = await ingestApp(t, {
    database,
    bus,
    inboxDatabase,
    inbox: { pollMs: POLL_MS, keepAliveMs: 200, streamsPerProcess: 1000, tokenRate: { perSecond: 1000, burst: 1000 } },
  });
  const N = 50;
  const users = Array.from({ length: N }, (_, i) => `feed-${i}`);
  const streams = await Promise.all(
    users.map(async (user) => opened(await openStream(app, (await mint(app, user)).token))),
  );
  await Promise.all(streams.map((s) => s.ready()));
  // Settled: each stream's first read, and the one more after the poller's first statement.
  await new Promise((resolve) => setTimeout(resolve, 3 * POLL_MS));

  const before = counter.queries;
  const WINDOW_MS = 3000;
  const keepAlives = streams[0]?.events().filter((e) => e.comment === "keep-alive").length ?? 0;
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
  const spent = counter.queries - before;
  t.ok(spent >= WINDOW_MS / POLL_MS - 3, `the poller ran: ${spent} statements`);
  t.ok(spent <= WINDOW_MS / POLL_MS + 2, `${N} idle streams cost ${spent} statements in ${WINDOW_MS} ms, one per poll`);
  const later = streams[0]?.events().filter((e) => e.comment === "keep-alive").length ?? 0;
  t.ok(later - keepAlives >= 8, `keep-alives on a timer (${later - keepAlives}), without a statement each`);

  // An item whose NOTIFY was lost (stored without one): the poller wakes its user's stream only.
  const notificationId = randomUUID();
  await seedNotification(database, { id: notificationId, clientId: "shop", userId: "feed-7" });
  const quiet = counter.queries;
  await database.sql`
    insert into inbox_items (user_id, client_id, notification_id, category, title, body)
    values ('feed-7', 'shop', ${notificationId}, 'account', 'Hi', 'found by the poller')`;
  await eventually(
    async () => (streams[7]?.events().some((e) => e.event === "notification") ? true : undefined),
    3000,
    "the poller to deliver the item",
  );
  t.ok(counter.queries - quiet <= 6, `the poll and one stream's read (${counter.queries - quiet} statements)`);
  t.notOk(
    streams.some((s, i) => i !== 7 && s.events().some((e) => e.event === "notification")),
    "no other stream got it",
  );

  // NOTIFY wakes at once, without waiting for a poll.
  const live = randomUUID();
  await seedNotification(database, { id: live, clientId: "shop", userId: "feed-9" });
  const started = Date.now();
  await storeInboxItem(database.sql, {
    userId: "feed-9",
    notificationId: live,
    category: "account",
    title: "Hi",
    body: "woken by NOTIFY",
  });
  await eventually(
    async () => (streams[9]?.events().some((e) => e.event === "notification") ? true : undefined),
    3000,
    "NOTIFY to deliver the item",
  );
  t.ok(Date.now() - started < 3000);
});
