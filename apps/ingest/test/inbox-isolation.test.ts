import { randomUUID } from "node:crypto";
import { createDb, seedApiKey, seedTemplate } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { countingDatabase, ingestApp } from "./support.js";

// The accept path does not feel the inbox: 10,000 inbox requests with one token (a client in a
// loop, or a script holding its token) leave POST /notifications' p99 within twice its idle
// value. The token is checked in memory, its rate limit answers most of them 429 without a
// statement, and the ones it serves read from the inbox's own pool, never the accept path's.

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

const p99 = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] as number;
};

/**
 * POST's latencies idle and while `TOTAL` inbox requests run `CONCURRENCY` at a time, in
 * alternating rounds, so that whatever else the machine runs meanwhile weighs on both alike.
 */
async function measure(app: App, token: string) {
  for (let i = 0; i < 100; i++) await post(app);
  const statuses = new Map<number, number>();
  const TOTAL = 10_000;
  const ROUNDS = 2;
  const CONCURRENCY = 64;
  const idle: number[] = [];
  const loaded: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < 200; i++) idle.push(await post(app));
    let sent = 0;
    const inboxLoad = Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (sent < TOTAL / ROUNDS) {
          sent++;
          const res = await app.request("/api/v1/inbox", { headers: { "x-inbox-token": token } });
          await res.arrayBuffer();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }),
    );
    let loading = true;
    void inboxLoad.finally(() => {
      loading = false;
    });
    const before = loaded.length;
    while (loading || loaded.length - before < 50) loaded.push(await post(app));
    await inboxLoad;
  }
  return { idle: p99(idle), loaded: p99(loaded), posts: loaded.length, statuses, total: TOTAL };
}

t.test("10,000 inbox requests with one token leave POST /notifications' p99 within 2x its idle value", async (t) => {
  const { app } = await ingestApp(t, {
    database,
    inboxDatabase,
    // As in production (AUTH_CACHE_TTL_SECONDS): keys are answered from memory.
    lookupKey: createKeyLookup(database, 5000),
  });
  const result = await measure(app, await mint(app));
  const served = result.statuses.get(200) ?? 0;
  t.equal(served + (result.statuses.get(429) ?? 0), result.total, `200 or 429: ${[...result.statuses]}`);
  t.ok(served > 0, `${served} were served`);
  t.ok(
    result.loaded <= 2 * result.idle,
    `POST p99 ${result.loaded.toFixed(2)} ms under the inbox load (${result.posts} POSTs), idle ${result.idle.toFixed(2)} ms`,
  );
});

t.test("with no rate limit in the way, the inbox's reads never touch the accept path's pool", async (t) => {
  const main = countingDatabase(database);
  const inbox = countingDatabase(inboxDatabase);
  const { app } = await ingestApp(t, {
    database: main.database,
    inboxDatabase: inbox.database,
    lookupKey: createKeyLookup(main.database, 60_000),
    inbox: {
      tokenRate: { perSecond: 1_000_000, burst: 1_000_000 },
      userRate: { perSecond: 1_000_000, burst: 1_000_000 },
    },
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
