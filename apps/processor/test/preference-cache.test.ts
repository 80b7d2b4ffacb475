import { connectBus } from "@notify/bus";
import { TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { createProfileSource } from "../src/preferences/profiles.js";
import { processorFixture, seedUser } from "./helpers.js";

// Routing reads preferences through the notify_prefs bucket. A change reaches routing within
// the bucket's TTL (5 s), the documented bound, and no later; without the bucket, Postgres.
const TTL_MS = 5000;
const { database, bus, log } = await processorFixture(t);
const kv = await bus.kv("notify_prefs");

t.test("a preference change is read within the cache TTL, not before it is due", async (t) => {
  const profiles = createProfileSource({ database, kv, ttlMs: TTL_MS, log });
  await seedUser(database, "cache-1", { channel_optout: [] });
  t.same((await profiles.load("cache-1")).preferences.channelOptout, []);
  const cachedAt = Date.now();
  await seedUser(database, "cache-1", { channel_optout: ["email"], locale: "fr" });
  t.same((await profiles.load("cache-1")).preferences.channelOptout, [], "read through the cache: not yet");

  let seenAt = 0;
  while (Date.now() - cachedAt < TTL_MS + 3000) {
    const profile = await profiles.load("cache-1");
    if (profile.preferences.channelOptout.includes("email")) {
      seenAt = Date.now();
      t.equal(profile.locale, "fr");
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.ok(seenAt > 0, "the change arrived");
  t.comment(`visible ${seenAt - cachedAt} ms after the cached read`);
  t.ok(seenAt - cachedAt <= TTL_MS + 1500, "within the TTL (plus a poll and a round trip)");
});

t.test("contacts and users without records are cached the same way", async (t) => {
  const profiles = createProfileSource({ database, kv, ttlMs: TTL_MS, log });
  t.same(await profiles.load("cache-nobody"), {
    preferences: { channelOptout: [], categoryOptout: [], quietHours: null, rateCapPerDay: null },
    deviceTokens: [],
    locale: null,
    email: null,
    phone: null,
  });
  await database.sql`insert into user_contacts (user_id, email) values ('cache-nobody', 'n@example.com')`;
  t.equal((await profiles.load("cache-nobody")).email, null, "cached: not yet");
  const fresh = createProfileSource({ database, kv: null, ttlMs: TTL_MS, log });
  t.equal((await fresh.load("cache-nobody")).email, "n@example.com", "without the bucket: straight from Postgres");
});

t.test("a cache that cannot be reached falls back to Postgres", async (t) => {
  const other = await connectBus({
    servers: TEST_NATS_URL,
    name: "cache-outage",
    namespace: bus.naming.namespace,
    partitions: 1,
  });
  const lost = await other.kv("notify_prefs");
  await other.close();
  const profiles = createProfileSource({ database, kv: lost, ttlMs: TTL_MS, log });
  await seedUser(database, "cache-2", { category_optout: ["news"] });
  t.same((await profiles.load("cache-2")).preferences.categoryOptout, ["news"]);
});

t.test("quiet hours that the API would refuse are ignored, not fatal to every message", async (t) => {
  const profiles = createProfileSource({ database, kv: null, ttlMs: TTL_MS, log });
  await seedUser(database, "cache-bad", { quiet_hours: { start: "22:00", end: "07:00", tz: "Mars/Olympus" } });
  t.equal((await profiles.load("cache-bad")).preferences.quietHours, null);
});

// The key a profile has in the bucket (user ids are any printable ASCII; KV keys are not).
const bucketKey = (userId: string) => Buffer.from(userId, "utf8").toString("base64url");

t.test("a user's later messages are routed from memory, not from the bucket", async (t) => {
  const profiles = createProfileSource({ database, kv, ttlMs: TTL_MS, log });
  await seedUser(database, "cache-mem", { channel_optout: [] });
  await profiles.load("cache-mem");
  // Gone from the bucket and changed in Postgres: only this process's memory still has the old one.
  await kv.delete(bucketKey("cache-mem"));
  await seedUser(database, "cache-mem", { channel_optout: ["sms"] });
  t.same((await profiles.load("cache-mem")).preferences.channelOptout, [], "from memory");
  t.equal((await kv.get(bucketKey("cache-mem")))?.operation, "DEL", "the bucket was not read into again");
  const off = createProfileSource({ database, kv, ttlMs: TTL_MS, log, localProfiles: 0 });
  t.same((await off.load("cache-mem")).preferences.channelOptout, ["sms"], "without memory: bucket, then Postgres");
});

t.test("loads of one user at once share one read", async (t) => {
  const profiles = createProfileSource({ database, kv, ttlMs: TTL_MS, log });
  await seedUser(database, "cache-burst");
  const loaded = await Promise.all(Array.from({ length: 20 }, () => profiles.load("cache-burst")));
  t.ok(
    loaded.every((p) => p === loaded[0]),
    "every caller got the one profile read",
  );
  const history = await kv.history({ key: bucketKey("cache-burst") });
  let puts = 0;
  for await (const entry of history) if (entry.operation === "PUT") puts++;
  t.equal(puts, 1, "one Postgres read, put in the bucket once");
  const shared = loaded[0]?.preferences.channelOptout as string[];
  t.throws(() => shared.push("email"), "the shared profile cannot be changed by one of its messages");
});

t.test("the TTL counts from the Postgres read, whichever cache passed the profile on", async (t) => {
  await seedUser(database, "cache-age", { category_optout: [] });
  // Another processor reads it from Postgres and fills the bucket now.
  await createProfileSource({ database, kv, ttlMs: TTL_MS, log }).load("cache-age");
  await seedUser(database, "cache-age", { category_optout: ["news"] });
  // This one meets it in the bucket near the end of its life, and keeps it in memory.
  let offset = TTL_MS - 1500;
  const profiles = createProfileSource({ database, kv, ttlMs: TTL_MS, log, now: () => Date.now() + offset });
  t.same((await profiles.load("cache-age")).preferences.categoryOptout, [], "from the bucket, still fresh");
  // 1.6 s later by its clock the memory copy was read from Postgres more than the TTL ago.
  offset += 1600;
  t.same((await profiles.load("cache-age")).preferences.categoryOptout, ["news"], "not from memory past the TTL");
});
