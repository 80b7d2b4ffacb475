import {
  isTimeZone,
  type PolicyPreferences,
  parseClock,
  type QuietHours,
  type SuppressionHold,
  suppressionAddress,
} from "@notify/core";
import { type Database, type DeviceToken, type ProfileRow, readProfileRow } from "@notify/db";
import { LRUCache } from "lru-cache";

/** What routing needs to know about a user: preferences and where each channel reaches them. */
export interface UserProfile {
  preferences: PolicyPreferences;
  deviceTokens: DeviceToken[];
  locale: string | null;
  email: string | null;
  phone: string | null;
  /** Entries of the suppression list for `email` and `phone`, every client's. */
  suppressions: readonly SuppressionHold[];
}

export interface ProfileSource {
  load(userId: string): Promise<UserProfile>;
  /** Drops what is held of the user: their next load reads Postgres. */
  forget(userId: string): void;
}

/**
 * Quiet hours the API validated; anything else (rows written around it) would throw deep in
 * the policy on every message of the user, so it counts as no quiet hours.
 */
const usableQuietHours = (q: QuietHours | null): QuietHours | null =>
  q && parseClock(q.start) !== null && parseClock(q.end) !== null && isTimeZone(q.tz) ? q : null;

/** Likewise a time zone the API validated, or none (send_at_local then falls back as without one). */
const usableTimeZone = (tz: string | null): string | null => (tz !== null && isTimeZone(tz) ? tz : null);

/**
 * The entries for the user's addresses as suppressionAddress spells them: the statement looks
 * them up in the same form, and this keeps it from ever matching more than that.
 */
function entriesFor(row: ProfileRow | undefined): SuppressionHold[] {
  const mine = (channel: string, address: string | null | undefined) =>
    address ? suppressionAddress(channel, address) : null;
  const addresses = { email: mine("email", row?.email), sms: mine("sms", row?.phone) };
  return (row?.suppressions ?? []).flatMap(({ address, ...entry }) =>
    addresses[entry.channel as keyof typeof addresses] === address ? [entry] : [],
  );
}

function toProfile(row: ProfileRow | undefined): UserProfile {
  return {
    preferences: {
      channelOptout: row?.channel_optout ?? [],
      categoryOptout: row?.category_optout ?? [],
      quietHours: usableQuietHours(row?.quiet_hours ?? null),
      rateCapPerDay: row?.rate_cap_per_day ?? null,
      timeZone: usableTimeZone(row?.time_zone ?? null),
    },
    deviceTokens: row?.device_tokens ?? [],
    locale: row?.locale ?? null,
    email: row?.email ?? null,
    phone: row?.phone ?? null,
    suppressions: entriesFor(row),
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
  for (const entry of profile.suppressions) Object.freeze(entry);
  Object.freeze(profile.suppressions);
  return Object.freeze(profile);
}

interface Held {
  profile: UserProfile;
  /** When the profile was read from Postgres. */
  readAt: number;
}

/**
 * Reads user profiles from Postgres through this process's memory: a profile is used only while
 * it is younger than `ttlMs` (5 s), counted from its Postgres read, so a preference or contact
 * change reaches routing within that and no later; `forget` (a change announced by ingest) makes
 * the next notification read it afresh. A user without records is cached too, and
 * loads of one user at once share one read (the reads of one event-loop iteration go in one
 * statement). One user's notifications all go to one lane partition, so to one processor: a
 * cache shared between processors (a KV bucket, tried) was met by almost no load and cost each
 * miss a get and a put on NATS.
 */
export function createProfileSource(deps: {
  database: Database;
  ttlMs: number;
  /** Users kept in memory at most (least recently used first out); 0 turns the memory cache off. */
  localProfiles?: number;
  now?: () => number;
}): ProfileSource {
  const now = deps.now ?? Date.now;
  const max = deps.localProfiles ?? DEFAULT_LOCAL_PROFILES;
  const local = max > 0 ? new LRUCache<string, Held>({ max }) : null;
  const loading = new Map<string, Promise<Held>>();
  const fresh = (held: Held | undefined): held is Held => held !== undefined && now() - held.readAt < deps.ttlMs;

  // Bumped by each change heard: a read in flight when one arrives is not kept, since it may
  // have read the row before the change committed.
  let generation = 0;
  async function read(userId: string): Promise<Held> {
    const readAt = now();
    return { profile: frozen(toProfile(await readProfileRow(deps.database, userId))), readAt };
  }

  return {
    forget(userId) {
      generation += 1;
      local?.delete(userId);
      loading.delete(userId);
    },
    async load(userId) {
      const held = local?.get(userId);
      if (fresh(held)) return held.profile;
      const inFlight = loading.get(userId);
      if (inFlight) return (await inFlight).profile;
      const reading = read(userId);
      const started = generation;
      loading.set(userId, reading);
      try {
        const got = await reading;
        if (generation === started) local?.set(userId, got);
        return got.profile;
      } finally {
        if (loading.get(userId) === reading) loading.delete(userId);
      }
    },
  };
}
