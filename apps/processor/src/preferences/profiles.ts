import type { KV } from "@notify/bus";
import { isTimeZone, type PolicyPreferences, parseClock, type QuietHours } from "@notify/core";
import { type Database, type DeviceToken, type ProfileRow, readProfileRow } from "@notify/db";
import type { Logger } from "@notify/log";

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

/**
 * Reads user profiles through the notify_prefs KV bucket (a cache
 * in front of Postgres). The bucket's TTL bounds staleness: an entry older than `ttlMs` is never used, even
 * before the server has expired it, so a preference or contact change reaches routing within
 * `ttlMs` (5 s). A user without records is cached too. When the bucket cannot be reached the
 * profile comes from Postgres: the cache saves load, it is never needed for correctness.
 */
export function createProfileSource(deps: {
  database: Database;
  kv: KV | null;
  ttlMs: number;
  log: Logger;
}): ProfileSource {
  let lastWarning = 0;
  const warn = (error: unknown, what: string) => {
    if (Date.now() - lastWarning < 10_000) return;
    lastWarning = Date.now();
    deps.log.warn({ err: error }, `preference cache ${what} failed; reading Postgres`);
  };

  async function fromCache(key: string): Promise<UserProfile | undefined> {
    if (!deps.kv) return undefined;
    try {
      const entry = await deps.kv.get(key);
      if (entry?.operation !== "PUT" || Date.now() - entry.created.getTime() >= deps.ttlMs) return undefined;
      return entry.json<UserProfile>();
    } catch (error) {
      warn(error, "read");
      return undefined;
    }
  }

  return {
    async load(userId) {
      const key = keyOf(userId);
      const cached = await fromCache(key);
      if (cached) return cached;
      const profile = toProfile(await readProfileRow(deps.database, userId));
      if (deps.kv) await deps.kv.put(key, encoder.encode(JSON.stringify(profile))).catch((e) => warn(e, "write"));
      return profile;
    },
  };
}
