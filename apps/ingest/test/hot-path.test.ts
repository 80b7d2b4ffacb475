import { seedApiKey, seedTemplate } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { createRateLimiter } from "../src/auth/rate-limit.js";
import { createTemplateLookup } from "../src/notifications/templates.js";

// Every POST asks for its key, its bucket and its template. Answered from memory, each is a
// plain value, not a promise: a promise and its microtask per lookup would be paid on every
// request of ingest's hot path. A miss still goes to Postgres and is a promise.
const { database } = await freshDatabase(t);
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const key = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest"] });

t.test("a cached key is answered at once; a miss, a forgotten key and an unknown key are looked up", async (t) => {
  const lookup = createKeyLookup(database, 60_000);
  const first = lookup(key);
  t.ok(first instanceof Promise, "the first lookup goes to Postgres");
  const principal = await first;
  t.equal(principal?.clientId, "shop");
  const again = lookup(key);
  t.notOk(again instanceof Promise, "the second is answered from the cache");
  t.same(again, principal);

  lookup.forget(principal?.keyId as string);
  t.ok(lookup(key) instanceof Promise, "a forgotten key is looked up again");

  const stranger = lookup("nk_live_unknown-key-0123456789");
  t.ok(stranger instanceof Promise);
  t.equal(await stranger, null);
  t.equal(lookup("nk_live_unknown-key-0123456789"), null, "an unknown key is remembered as such");
});

t.test("with no cache every lookup goes to Postgres and sees the row as it is", async (t) => {
  const lookup = createKeyLookup(database, 0);
  t.ok(lookup(key) instanceof Promise);
  await lookup(key);
  const second = lookup(key);
  t.ok(second instanceof Promise);
  t.equal((await second)?.clientId, "shop");
});

t.test("a template is answered from the cache once read, an unknown one too", async (t) => {
  const templates = createTemplateLookup(database, 60_000);
  const first = templates("welcome");
  t.ok(first instanceof Promise);
  t.same(await first, { id: "welcome", version: 1, params: ["name"], ttlSeconds: null });
  t.same(templates("welcome"), { id: "welcome", version: 1, params: ["name"], ttlSeconds: null });
  t.equal(await templates("nope"), null);
  t.equal(templates("nope"), null, "a known absence is a plain null");
  templates.forget("welcome");
  t.ok(templates("welcome") instanceof Promise, "a template given a version is read again");
});

t.test("the rate limiter answers at once unless the request has to wait in the queue", async (t) => {
  let now = 1_000_000;
  const limiter = createRateLimiter({ perSecond: 10, burst: 20 }, () => now);
  const admitted = limiter.admit("k1", null);
  t.notOk(admitted instanceof Promise, "an empty bucket admits at once");
  t.equal((admitted as { limits: { burst: number } }).limits.burst, 20);
  // Fill the queue: past the drain rate, requests wait their turn (a promise), then are refused.
  const outcomes: Array<"now" | "queued" | "refused"> = [];
  for (let i = 0; i < 40; i++) {
    try {
      outcomes.push(limiter.admit("k2", null) instanceof Promise ? "queued" : "now");
    } catch {
      outcomes.push("refused");
    }
  }
  t.ok(outcomes.includes("queued"), "a request that must wait gets a promise");
  t.ok(outcomes.includes("refused"), "a full queue refuses");
  now += 60_000;
  t.notOk(limiter.admit("k2", null) instanceof Promise, "a drained bucket admits at once again");
});
