import { randomBytes, randomUUID } from "node:crypto";
import { createKey, type Database, seedApiKey } from "@notify/db";
import { createAttemptThrottle, listen } from "@notify/http";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { ingestApp } from "./support.js";

// Before authentication: the key cache bounds what random keys cost Postgres, and the
// per-address throttle answers a flood of bad keys 429 without looking them up.

const { database, bus } = await ingestApp(t);

/** The same database, counting the statements sent through it. */
function counting(database: Database) {
  const counter = { queries: 0 };
  const sql = new Proxy(database.sql, {
    apply(target, self, args) {
      counter.queries += 1;
      return Reflect.apply(target, self, args);
    },
  });
  return { counter, database: { ...database, sql } as Database };
}

const randomKey = () => `ntf_${randomBytes(24).toString("base64url")}`;

t.test("the key cache: random keys cost one lookup each at most, never evict a known key", async (t) => {
  const { counter, database: db } = counting(database);
  const lookup = createKeyLookup(db, 60_000);
  const issued = await createKey(database, { clientId: "shop", name: "cache", scopes: ["read"] });
  t.match(await lookup(issued.key), { clientId: "shop" });
  const afterKnown = counter.queries;

  // One unknown key presented by 200 concurrent requests: one query, not 200.
  const bad = randomKey();
  const answers = await Promise.all(Array.from({ length: 200 }, () => lookup(bad)));
  t.ok(
    answers.every((a) => a === null),
    "unknown",
  );
  t.equal(counter.queries - afterKnown, 1, "concurrent lookups of one key share one query");
  for (let i = 0; i < 100; i++) await lookup(bad);
  t.equal(counter.queries - afterKnown, 1, "then it is answered from the negative cache for its lifetime");

  // A flood of distinct random keys, far beyond both caches' sizes.
  const before = counter.queries;
  for (let i = 0; i < 2_500; i++) await lookup(randomKey());
  t.equal(counter.queries - before, 2_500, "one query per distinct key, none more");
  const beforeKnown = counter.queries;
  t.match(await lookup(issued.key), { clientId: "shop" });
  t.equal(counter.queries, beforeKnown, "the known key is still served from the cache: no query");
});

t.test(
  "with an address budget, a concurrent flood of random keys reaches Postgres at most `burst` times",
  async (t) => {
    const { counter, database: db } = counting(database);
    const lookup = createKeyLookup(db, 60_000);
    const throttle = createAttemptThrottle({ perSecond: 1, burst: 20, now: () => 0 });
    const budget = throttle.budget("198.51.100.9");
    const outcomes = await Promise.allSettled(Array.from({ length: 500 }, () => lookup(randomKey(), budget)));
    const refused = outcomes.filter((o) => o.status === "rejected");
    t.ok(counter.queries <= 20, `${counter.queries} queries for 500 random keys`);
    t.equal(refused.length, 500 - counter.queries, "the rest were refused before any query");
    t.match((refused[0] as PromiseRejectedResult).reason, { code: "rate_limited", status: 429 });
  },
);

t.test("ingest answers a flood of bad keys from one address 429 with Retry-After; valid keys still work", async (t) => {
  const { counter, database: db } = counting(database);
  const throttle = createAttemptThrottle({ perSecond: 0.5, burst: 5 });
  const { app } = await ingestApp(t, {
    database: db,
    bus,
    lookupKey: createKeyLookup(db, 60_000),
    preauthThrottle: throttle,
  });
  const good = await seedApiKey(database, { clientId: "shop", name: "good", scopes: ["read"] });
  const uncached = await seedApiKey(database, { clientId: "shop", name: "uncached", scopes: ["read"] });
  const from = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });
  const get = (key: string, address: string) =>
    app.request(`/api/v1/notifications/${randomUUID()}`, { headers: { "x-api-key": key } }, from(address));

  t.equal((await get(good, "203.0.113.7")).status, 404, "the good key passes (and is now cached)");
  for (let i = 0; i < 5; i++) t.equal((await get(randomKey(), "203.0.113.7")).status, 401, `bad key ${i + 1}: 401`);
  const queriesBefore = counter.queries;
  const limited = await get(randomKey(), "203.0.113.7");
  t.equal(limited.status, 429, "past the burst: 429");
  t.equal(limited.headers.get("content-type"), "application/problem+json");
  t.ok(Number(limited.headers.get("retry-after")) >= 1, "with Retry-After");
  t.match(await limited.json(), { code: "rate_limited", status: 429 });
  t.equal(counter.queries, queriesBefore, "refused without a lookup");

  t.equal((await get(good, "203.0.113.7")).status, 404, "a cached valid key from the same address still works");
  t.equal((await get(uncached, "203.0.113.7")).status, 429, "a key the cache does not know waits like any other");
  t.equal((await get(randomKey(), "203.0.113.8")).status, 401, "another address has its own budget");
  t.equal((await get(uncached, "2001:db8:1:2::1")).status, 404, "valid keys spend nothing");
  for (let i = 0; i < 5; i++) await get(randomKey(), "2001:db8:1:2::1");
  t.equal((await get(randomKey(), "2001:db8:1:2:ffff::9")).status, 429, "an IPv6 /64 shares one budget");
  const inbox = await app.request("/api/v1/inbox", { headers: { "x-inbox-token": "ntu_nope" } }, from("203.0.113.7"));
  t.equal(inbox.status, 429, "inbox tokens are behind the same budget");
});

t.test("the socket's address is the one throttled, not X-Forwarded-For", async (t) => {
  const { app } = await ingestApp(t, {
    database,
    bus,
    preauthThrottle: createAttemptThrottle({ perSecond: 0.1, burst: 2 }),
  });
  const server = await listen(app, 0, "127.0.0.1");
  t.teardown(() => server.close());
  const get = (forwardedFor: string) =>
    fetch(`http://127.0.0.1:${server.port}/api/v1/notifications/${randomUUID()}`, {
      headers: { "x-api-key": randomKey(), "x-forwarded-for": forwardedFor },
    });
  t.equal((await get("198.51.100.1")).status, 401);
  t.equal((await get("198.51.100.2")).status, 401);
  t.equal((await get("198.51.100.3")).status, 429, "a new X-Forwarded-For each time changes nothing");
});
