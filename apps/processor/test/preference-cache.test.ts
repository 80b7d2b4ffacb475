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
