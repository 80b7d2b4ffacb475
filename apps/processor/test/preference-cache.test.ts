import { countingDatabase } from "@notify/testing";
import t from "tap";
import { createProfileSource } from "../src/preferences/profiles.js";
import { processorFixture, seedUser } from "./helpers.js";

// Routing reads preferences through this process's memory. A change reaches routing within the
// cache's TTL (5 s), the documented bound, and no later.
const TTL_MS = 5000;
const { database, url } = await processorFixture(t);

t.test("a preference change is read within the cache TTL, not before it is due", async (t) => {
  const profiles = createProfileSource({ database, ttlMs: TTL_MS });
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
  const profiles = createProfileSource({ database, ttlMs: TTL_MS });
  t.same(await profiles.load("cache-nobody"), {
    preferences: { channelOptout: [], categoryOptout: [], quietHours: null, rateCapPerDay: null, timeZone: null },
    deviceTokens: [],
    locale: null,
    email: null,
    phone: null,
    suppressions: [],
  });
  await database.sql`insert into user_contacts (user_id, email) values ('cache-nobody', 'n@example.com')`;
  t.equal((await profiles.load("cache-nobody")).email, null, "cached: not yet");
  const fresh = createProfileSource({ database, ttlMs: TTL_MS });
  t.equal((await fresh.load("cache-nobody")).email, "n@example.com", "another process reads Postgres");
});

t.test("quiet hours that the API would refuse are ignored, not fatal to every message", async (t) => {
  const profiles = createProfileSource({ database, ttlMs: TTL_MS });
  await seedUser(database, "cache-bad", { quiet_hours: { start: "22:00", end: "07:00", tz: "Mars/Olympus" } });
  t.equal((await profiles.load("cache-bad")).preferences.quietHours, null);
});

t.test("the profile carries the user's time zone; one the API would refuse reads as none", async (t) => {
  const profiles = createProfileSource({ database, ttlMs: 0 });
  await seedUser(database, "cache-tz", { time_zone: "Asia/Tokyo" });
  t.equal((await profiles.load("cache-tz")).preferences.timeZone, "Asia/Tokyo");
  await seedUser(database, "cache-tz", { time_zone: "Mars/Olympus" });
  t.equal((await profiles.load("cache-tz")).preferences.timeZone, null, "an unknown zone");
  await seedUser(database, "cache-tz", { time_zone: null });
  t.equal((await profiles.load("cache-tz")).preferences.timeZone, null, "none set");
});

t.test("a user's later messages are routed from memory; without it, each from Postgres", async (t) => {
  const counting = await countingDatabase(t, url);
  const profiles = createProfileSource({ database: counting, ttlMs: TTL_MS });
  await seedUser(database, "cache-mem", { channel_optout: [] });
  await profiles.load("cache-mem");
  await seedUser(database, "cache-mem", { channel_optout: ["sms"] });
  const read = counting.statements();
  t.same((await profiles.load("cache-mem")).preferences.channelOptout, [], "from memory");
  t.equal(counting.statements(), read, "no statement for it");
  const off = createProfileSource({ database, ttlMs: TTL_MS, localProfiles: 0 });
  t.same((await off.load("cache-mem")).preferences.channelOptout, ["sms"], "without memory: Postgres");
  const never = createProfileSource({ database, ttlMs: 0 });
  await never.load("cache-mem");
  await seedUser(database, "cache-mem", { channel_optout: ["email"] });
  t.same((await never.load("cache-mem")).preferences.channelOptout, ["email"], "a TTL of 0 reads every time");
});

t.test("loads of one user at once share one read, and its profile cannot be changed", async (t) => {
  const counting = await countingDatabase(t, url);
  const profiles = createProfileSource({ database: counting, ttlMs: TTL_MS });
  await seedUser(database, "cache-burst");
  const loaded = await Promise.all(Array.from({ length: 20 }, () => profiles.load("cache-burst")));
  t.ok(
    loaded.every((p) => p === loaded[0]),
    "every caller got the one profile read",
  );
  t.equal(counting.statements(), 1, "one Postgres read");
  const shared = loaded[0]?.preferences.channelOptout as string[];
  t.throws(() => shared.push("email"), "the shared profile cannot be changed by one of its messages");
});

t.test("the TTL counts from the Postgres read", async (t) => {
  let offset = 0;
  const profiles = createProfileSource({ database, ttlMs: TTL_MS, now: () => Date.now() + offset });
  await seedUser(database, "cache-age", { category_optout: [] });
  await profiles.load("cache-age");
  await seedUser(database, "cache-age", { category_optout: ["news"] });
  offset = TTL_MS - 500;
  t.same((await profiles.load("cache-age")).preferences.categoryOptout, [], "still fresh");
  offset = TTL_MS + 100;
  t.same((await profiles.load("cache-age")).preferences.categoryOptout, ["news"], "not from memory past the TTL");
});

t.test("a change announced is read by the next load, and a read in flight then is not kept", async (t) => {
  const profiles = createProfileSource({ database, ttlMs: 60_000 });
  await seedUser(database, "cache-told", { channel_optout: [] });
  t.same((await profiles.load("cache-told")).preferences.channelOptout, []);
  await seedUser(database, "cache-told", { channel_optout: ["sms"] });
  profiles.forget("cache-told");
  t.same((await profiles.load("cache-told")).preferences.channelOptout, ["sms"], "read afresh after forget");

  // A read that may have begun before the change committed: used once, not cached.
  await seedUser(database, "cache-told", { channel_optout: ["sms"] });
  profiles.forget("cache-told");
  const inFlight = profiles.load("cache-told");
  await seedUser(database, "cache-told", { channel_optout: ["push"] });
  profiles.forget("cache-told");
  await inFlight;
  t.same((await profiles.load("cache-told")).preferences.channelOptout, ["push"], "the read after the change");
});
