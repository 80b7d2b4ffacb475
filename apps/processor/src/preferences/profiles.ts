import type { KV } from "@notify/bus";
import { isTimeZone, type PolicyPreferences, parseClock, type QuietHours } from "@notify/core";
import { type Database, type DeviceToken, type ProfileRow, readProfileRow } from "@notify/db";
import type { Logger } from "@notify/log";
import { LRUCache } from "lru-cache";

/** What routing needs to know about a user: preferences and where each channel reaches them. */
export interface UserProfile {
  preferences: PolicyPreferences;
  deviceTokens: DeviceToken[];
  locale: string | null;
  email: string | null;
  phone: string | null;
}

export interface ProfileSource {
  load(userId: string): Promise<UserProfile>;
}

/** KV keys allow only a few characters; user ids are any printable ASCII. */
const keyOf = (userId: string) => Buffer.from(userId, "utf8").toString("base64url");
const encoder = new TextEncoder();

/**
 * Quiet hours the API validated; anything else (rows written around it) would throw deep in
 * the policy on every message of the user, so it counts as no quiet hours.
 */
const usableQuietHours = (q: QuietHours | null): QuietHours | null =>
  q && parseClock(q.start) !== null && parseClock(q.end) !== null && isTimeZone(q.tz) ? q : null;

function toProfile(row: ProfileRow | undefined): UserProfile {
  return {
    preferences: {
      channelOptout: row?.channel_optout ?? [],
      categoryOptout: row?.category_optout ?? [],
      quietHours: usableQuietHours(row?.quiet_hours ?? null),
      rateCapPerDay: row?.rate_cap_per_day ?? null,
    },
    deviceTokens: row?.device_tokens ?? [],
    locale: row?.locale ?? null,
    email: row?.email ?? null,
    phone: row?.phone ?? null,
  };
}

/** Users whose profile one source keeps in memory at most, when not given. */
export const DEFAULT_LOCAL_PROFILES = 10_000;

/** One profile serves every message of its user while it is fresh: nothing may change it. */
function frozen(profile: UserProfile): UserProfile {
  const { preferences } = profile;
  Object.freeze(preferences.channelOptout);
  Object.freeze(preferences.categoryOptout);
  if (preferences.quietHours) Object.freeze(preferences.quietHours);
  Object.freeze(preferences);
  for (const token of profile.deviceTokens) {
    if (token.keys) Object.freeze(token.keys);
    Object.freeze(token);
  }
  Object.freeze(profile.deviceTokens);
  return Object.freeze(profile);
}

interface Held {
  profile: UserProfile;
  /** When the profile was read from Postgres (by this process, or by whoever filled the bucket). */
  readAt: number;
}

/**
 * Reads user profiles through two caches in front of Postgres: this process's memory, then the
 * notify_prefs KV bucket shared by every processor. A profile is used only while it is younger
 * than `ttlMs`, counted from when it was read from Postgres whichever cache holds it, so a
 * preference or contact change reaches routing within `ttlMs` (5 s) and no later. A user without
 * records is cached too. The memory cache spares a bucket round trip for a user with several
 * notifications in hand, and loads of one user at once share one read. When the bucket cannot be
 * reached the profile comes from Postgres: the caches save load, they are never needed for
 * correctness.
 */
export function createProfileSource(deps: {
  database: Database;
  kv: KV | null;
  ttlMs: number;
  log: Logger;
  /** Users kept in memory at most (least recently used first out); 0 turns the memory cache off. */
  localProfiles?: number;
  now?: () => number;
}): ProfileSource {
  const now = deps.now ?? Date.now;
  const max = deps.localProfiles ?? DEFAULT_LOCAL_PROFILES;
  const local = max > 0 ? new LRUCache<string, Held>({ max }) : null;
  const loading = new Map<string, Promise<Held>>();
  let lastWarning = 0;
  const warn = (error: unknown, what: string) => {
    if (now() - lastWarning < 10_000) return;
    lastWarning = now();
    deps.log.warn({ err: error }, `preference cache ${what} failed; reading Postgres`);
  };
  const fresh = (held: Held | undefined): held is Held => held !== undefined && now() - held.readAt < deps.ttlMs;

  async function fromBucket(key: string): Promise<Held | undefined> {
    if (!deps.kv) return undefined;
    try {
      const entry = await deps.kv.get(key);
      if (entry?.operation !== "PUT") return undefined;
      // The server stamps `created`: one in this process's future (clocks apart) counts as now.
      const held = { profile: frozen(entry.json<UserProfile>()), readAt: Math.min(entry.created.getTime(), now()) };
      return fresh(held) ? held : undefined;
    } catch (error) {
      warn(error, "read");
      return undefined;
    }
  }

  async function read(userId: string): Promise<Held> {
    const key = keyOf(userId);
    const cached = await fromBucket(key);
    if (cached) return cached;
    const readAt = now();
    const profile = toProfile(await readProfileRow(deps.database, userId));
    if (deps.kv) await deps.kv.put(key, encoder.encode(JSON.stringify(profile))).catch((e) => warn(e, "write"));
    return { profile: frozen(profile), readAt };
  }

  return {
    async load(userId) {
      const held = local?.get(userId);
      if (fresh(held)) return held.profile;
      const inFlight = loading.get(userId);
      if (inFlight) return (await inFlight).profile;
      const reading = read(userId);
      loading.set(userId, reading);
      try {
        const got = await reading;
        local?.set(userId, got);
        return got.profile;
      } finally {
        loading.delete(userId);
      }
    },
  };
}
