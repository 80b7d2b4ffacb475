import { randomBytes, randomUUID } from "node:crypto";
import { hashKey } from "@notify/core";
import { createKey, type Database, seedApiKey } from "@notify/db";
import { createAttemptThrottle, listen, trustedProxies } from "@notify/http";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { countingDatabase, ingestApp } from "./support.js";

// Before authentication: the key cache bounds what random keys cost Postgres, and the
// per-address throttle answers a flood of bad keys 429 without looking them up.

const { database, bus } = await ingestApp(t);

const randomKey = () => `ntf_${randomBytes(24).toString("base64url")}`;

t.test("the key cache: random keys cost one lookup each at most, never evict a known key", async (t) => {
  const { counter, database: db } = countingDatabase(database);
  const lookup = createKeyLookup(db, 60_000);
  await lookup.ready;
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
    const { counter, database: db } = countingDatabase(database);
    const lookup = createKeyLookup(db, 60_000);
    await lookup.ready;
    counter.queries = 0;
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
  const { counter, database: db } = countingDatabase(database);
  const throttle = createAttemptThrottle({ perSecond: 0.5, burst: 5 });
  const good = await seedApiKey(database, { clientId: "shop", name: "good", scopes: ["read"] });
  const uncached = await seedApiKey(database, { clientId: "shop", name: "uncached", scopes: ["read"] });
  const lookupKey = createKeyLookup(db, 60_000);
  await lookupKey.ready;
  const { app } = await ingestApp(t, { database: db, bus, lookupKey, preauthThrottle: throttle });
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
  t.equal(
    (await get(uncached, "203.0.113.7")).status,
    404,
    "a valid key the cache does not know is not refused either",
  );
  t.equal((await get(randomKey(), "203.0.113.8")).status, 401, "another address has its own budget");
  t.equal((await get(uncached, "2001:db8:1:2::1")).status, 404, "valid keys spend nothing");
  for (let i = 0; i < 5; i++) await get(randomKey(), "2001:db8:1:2::1");
  t.equal((await get(randomKey(), "2001:db8:1:2:ffff::9")).status, 429, "an IPv6 /64 shares one budget");
  const opaque = `ntu_${randomBytes(32).toString("base64url")}`;
  const inbox = await app.request("/api/v1/inbox", { headers: { "x-inbox-token": opaque } }, from("203.0.113.7"));
  t.equal(inbox.status, 429, "opaque inbox tokens (looked up) are behind the same budget");
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

/** An unsigned key (no MAC), stored directly as a deployment holding one has it. */
async function unsignedKey(clientId: string, scopes: string[]): Promise<{ id: string; key: string }> {
  const key = `ntf_${randomBytes(32).toString("base64url")}`;
  const id = randomUUID();
  await database.sql`insert into api_keys (id, client_id, name, prefix, key_hash, scopes)
    values (${id}, ${clientId}, 'unsigned', ${key.slice(0, 12)}, ${hashKey(key)}, ${scopes})`;
  return { id, key };
}

t.test("2,000 random keys from one address, then valid keys from it answer at once", async (t) => {
  const throttle = createAttemptThrottle({ perSecond: 2, burst: 60 });
  const signed = await seedApiKey(database, { clientId: "shop", name: "signed", scopes: ["read"] });
  const legacy = await unsignedKey("shop", ["read"]);
  const lookupKey = createKeyLookup(database, 5_000);
  await lookupKey.ready;
  // A key created after the keys were read, heard of through its announcement.
  const late = await unsignedKey("shop", ["read"]);
  lookupKey.forget(late.id);
  const { app } = await ingestApp(t, { database, bus, lookupKey, preauthThrottle: throttle });
  const from = { incoming: { socket: { remoteAddress: "192.0.2.44" } } };
  const list = (key: string) =>
    app.request("/api/v1/users/someone/notifications", { headers: { "x-api-key": key } }, from);
  const statuses = new Map<number, number>();
  for (let i = 0; i < 2_000; i++) {
    const status = (await list(i % 2 === 0 ? randomKey() : `${signed.slice(0, -22)}${"A".repeat(22)}`)).status;
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
  }
  t.ok((statuses.get(429) ?? 0) > 0, `the address's budget is spent (${[...statuses].join(" ")})`);
  await new Promise((resolve) => setTimeout(resolve, 50)); // the late key's announcement is applied
  for (const [name, key] of [
    ["a signed key", signed],
    ["an unsigned key held since start", legacy.key],
    ["an unsigned key announced after start", late.key],
  ] as const) {
    const answer = await list(key);
    t.equal(answer.status, 200, `${name}: 200`);
  }
  t.equal((await list(randomKey())).status, 429, "while random keys from it are still refused");
});

t.test("a signed key with a MAC that is not this deployment's is refused without a lookup", async (t) => {
  const { counter, database: db } = countingDatabase(database);
  const lookup = createKeyLookup(db, 60_000);
  await lookup.ready;
  const signed = await seedApiKey(database, { clientId: "shop", name: "real", scopes: ["read"] });
  counter.queries = 0;
  const budget = createAttemptThrottle({ perSecond: 1, burst: 3, now: () => 0 }).budget("198.51.100.77");
  for (let i = 0; i < 500; i++) {
    t.equal(
      await lookup(`ntf_${randomBytes(32).toString("base64url")}.${randomBytes(16).toString("base64url")}`, budget),
      null,
    );
  }
  t.equal(counter.queries, 0, "no query for any of them");
  t.match(await lookup(signed, budget), { clientId: "shop" }, "the budget they spent does not refuse a signed key");
});

t.test(
  "behind a trusted proxy the client is the address it forwarded; elsewhere X-Forwarded-For is ignored",
  async (t) => {
    const { app } = await ingestApp(t, {
      database,
      bus,
      preauthThrottle: createAttemptThrottle({ perSecond: 0.1, burst: 2 }),
      trustedProxies: trustedProxies([
        { address: "10.0.0.0", prefix: 8, family: 4 },
        { address: "fd00::", prefix: 8, family: 6 },
      ]),
    });
    const from = (peer: string, forwardedFor?: string) =>
      app.request(
        `/api/v1/notifications/${randomUUID()}`,
        { headers: { "x-api-key": randomKey(), ...(forwardedFor ? { "x-forwarded-for": forwardedFor } : {}) } },
        { incoming: { socket: { remoteAddress: peer } } },
      );
    // Two clients behind the proxy, each with its own budget.
    t.equal((await from("10.1.2.3", "198.51.100.1")).status, 401);
    t.equal((await from("10.1.2.3", "198.51.100.1")).status, 401);
    t.equal((await from("10.1.2.3", "198.51.100.1")).status, 429, "the first client's budget is spent");
    t.equal((await from("::ffff:10.9.9.9", "198.51.100.2")).status, 401, "the second client is not refused");
    // A client's own X-Forwarded-For entry is left of the proxy's: the proxy-added one counts.
    t.equal((await from("10.1.2.3", "203.0.113.50, 198.51.100.1")).status, 429, "a spoofed entry changes nothing");
    t.equal((await from("10.1.2.3", "198.51.100.1, fd00::7")).status, 429, "chained trusted proxies are skipped");
    // From a peer that is not a trusted proxy the header is ignored.
    t.equal((await from("203.0.113.9", "198.51.100.3")).status, 401);
    t.equal((await from("203.0.113.9", "198.51.100.4")).status, 401);
    t.equal((await from("203.0.113.9", "198.51.100.5")).status, 429, "an untrusted peer's header is not believed");
  },
);

t.test("a key revoked while the active keys are being read is not put back by that read", async (t) => {
  const legacy = await unsignedKey("shop", ["read"]);
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let held = 0;
  // The same pool, but the answer to the read of every active key waits for the gate.
  const sql = new Proxy(database.sql, {
    apply(target, self, args) {
      const query = Reflect.apply(target, self, args) as Promise<unknown>;
      const text = Array.isArray(args[0]) ? (args[0] as string[]).join("?") : "";
      if (!text.includes("select id, key_hash, revoked_at from api_keys")) return query;
      held += 1;
      const answer = query.then((rows) => rows);
      return gate.then(() => answer);
    },
  });
  const lookup = createKeyLookup({ ...database, sql } as Database, 60_000);
  t.teardown(() => lookup.close());
  await new Promise((resolve) => setTimeout(resolve, 100)); // the read has its rows, held back
  t.equal(held, 1, "the read is under way");
  await database.sql`update api_keys set revoked_at = now() where id = ${legacy.id}`;
  lookup.forget(legacy.id);
  await new Promise((resolve) => setTimeout(resolve, 50));
  open();
  await lookup.ready;
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.notOk(lookup.vouches(legacy.key), "the revoked key is not among the active ones");
});

t.test("a credentials secret that could not be read at start is read again", async (t) => {
  let failing = true;
  let queries = 0;
  const sql = new Proxy(database.sql, {
    apply(target, self, args) {
      const text = Array.isArray(args[0]) ? (args[0] as string[]).join("?") : "";
      if (failing && text.includes("from deployment_secrets")) return Promise.reject(new Error("connection lost"));
      queries += 1;
      return Reflect.apply(target, self, args);
    },
  });
  const lookup = createKeyLookup({ ...database, sql } as Database, 60_000, { retryMs: 20 });
  t.teardown(() => lookup.close());
  await lookup.ready;
  failing = false;
  await new Promise((resolve) => setTimeout(resolve, 50));
  const forged = `ntf_${randomBytes(32).toString("base64url")}.${randomBytes(16).toString("base64url")}`;
  await lookup(forged); // finds no secret yet, and starts reading it again
  await new Promise((resolve) => setTimeout(resolve, 100));
  const before = queries;
  const budget = createAttemptThrottle({ perSecond: 1, burst: 100, now: () => 0 }).budget("198.51.100.90");
  t.equal(
    await lookup(`ntf_${randomBytes(32).toString("base64url")}.${randomBytes(16).toString("base64url")}`, budget),
    null,
  );
  t.equal(queries, before, "a forged key is refused by its MAC again, without a lookup");
});
