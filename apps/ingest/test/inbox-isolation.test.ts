import { randomUUID } from "node:crypto";
import { createDb, seedApiKey, seedTemplate } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t, { type Test } from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import type { IngestDeps } from "../src/deps.js";
import { countingDatabase, ingestApp } from "./support.js";

// The accept path does not feel the inbox: 10,000 inbox requests with one token (a client in a
// loop, or a script holding its token) are answered without the accept path's pool. The token is
// checked in memory, its rate limit answers most of them 429 without a statement, and the ones
// it serves read from the inbox's own pool. The test counts statements, not milliseconds: a
// latency bound fails on a loaded machine whatever the code does.

const { url, database } = await freshDatabase(t);
const inboxDatabase = createDb({ url, max: 2, applicationName: "notify-ingest-inbox" });
t.teardown(() => inboxDatabase.close());
type App = Awaited<ReturnType<typeof ingestApp>>["app"];
await seedTemplate(database, {
  id: "welcome",
  params: [],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hello" }],
});
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest"] });
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
const mint = async (app: App) => {
  const minted = await app.request("/api/v1/users/looper/inbox-tokens", {
    method: "POST",
    headers: { authorization: `Bearer ${inboxKey}` },
  });
  return ((await minted.json()) as { token: string }).token;
};

const post = async (app: App) => {
  const started = performance.now();
  const res = await app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": ingestKey, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "u1",
      category: "orders",
      template_id: "welcome",
      data: {},
      priority: "transactional",
    }),
  });
  if (res.status !== 202) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - started;
};

/**
 * Ingest with each pool's statements counted, keys answered from memory as in production
 * (AUTH_CACHE_TTL_SECONDS), and the inbox's settings, if given.
 */
async function countedApp(t: Test, inboxSettings?: IngestDeps["inbox"]) {
  const main = countingDatabase(database);
  const inbox = countingDatabase(inboxDatabase);
  const { app } = await ingestApp(t, {
    database: main.database,
    inboxDatabase: inbox.database,
    lookupKey: createKeyLookup(main.database, 60_000),
    ...(inboxSettings ? { inbox: inboxSettings } : {}),
  });
  return { main, inbox, app };
}

t.test("10,000 inbox requests with one token: the 429s run no statement, POSTs meanwhile are accepted", async (t) => {
  const { main, inbox, app } = await countedApp(t);
  const token = await mint(app);
  // What one served read costs the inbox's pool, on a token of its own (the rate limit is per
  // token and per user, so the looper's buckets stay full).
  const other = await mint(app);
  let before = inbox.counter.queries;
  t.equal((await app.request("/api/v1/inbox", { headers: { "x-inbox-token": other } })).status, 200);
  const perRead = inbox.counter.queries - before;
  t.ok(perRead > 0, `a served read runs ${perRead} statements`);

  /** `total` inbox requests, 64 at a time, while `meanwhile` runs until they are answered. */
  const flood = async (total: number, meanwhile: (loading: () => boolean) => Promise<void>) => {
    const statuses = new Map<number, number>();
    let sent = 0;
    let loading = true;
    const load = Promise.all(
      Array.from({ length: 64 }, async () => {
        while (sent < total) {
          sent++;
          const res = await app.request("/api/v1/inbox", { headers: { "x-inbox-token": token } });
          await res.arrayBuffer();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }),
    ).finally(() => {
      loading = false;
    });
    await meanwhile(() => loading);
    await load;
    return statuses;
  };

  // The inbox alone: nothing on the accept path's pool, and a statement only for what is served.
  before = inbox.counter.queries;
  const mainBefore = main.counter.queries;
  const statuses = await flood(5000, async () => {});
  const served = statuses.get(200) ?? 0;
  const limited = statuses.get(429) ?? 0;
  t.equal(served + limited, 5000, `200 or 429: ${[...statuses]}`);
  t.ok(served > 0 && limited > 0, `${served} served, ${limited} answered 429`);
  t.equal(main.counter.queries - mainBefore, 0, "no statement on the accept path's pool");
  t.ok(
    inbox.counter.queries - before <= served * perRead,
    `the inbox's pool ran ${inbox.counter.queries - before} statements for ${served} served reads`,
  );

  // With POSTs beside it: every one is accepted while the inbox is flooded.
  let posts = 0;
  const beside = await flood(5000, async (loading) => {
    while (loading()) {
      await post(app);
      posts++;
    }
  });
  t.equal((beside.get(200) ?? 0) + (beside.get(429) ?? 0), 5000, `200 or 429: ${[...beside]}`);
  t.ok(posts > 0, `${posts} POSTs accepted meanwhile`);
});

t.test("with no rate limit in the way, the inbox's reads never touch the accept path's pool", async (t) => {
  const { main, inbox, app } = await countedApp(t, {
    tokenRate: { perSecond: 1_000_000, burst: 1_000_000 },
    userRate: { perSecond: 1_000_000, burst: 1_000_000 },
  });
  const token = await mint(app);
  t.equal((await app.request("/api/v1/inbox", { headers: { "x-inbox-token": token } })).status, 200);
  const before = { main: main.counter.queries, inbox: inbox.counter.queries };
  const statuses = await Promise.all(
    Array.from({ length: 2000 }, async () => {
      const res = await app.request("/api/v1/inbox", { headers: { "x-inbox-token": token } });
      await res.arrayBuffer();
      return res.status;
    }),
  );
  t.ok(
    statuses.every((s) => s === 200),
    "all served",
  );
  t.equal(main.counter.queries - before.main, 0, "no statement on the accept path's pool");
  t.ok(
    inbox.counter.queries - before.inbox >= 2000,
    "the inbox's pool took them (a statement each, and its fragments)",
  );
});
