import { DEFAULT_PREFERENCES } from "@notify/core";
import { type Database, type PreferencesRow, readPreferences } from "@notify/db";
import { toAppError } from "@notify/http";
import type { PreferencesResponse } from "./schemas.js";

export interface StoredPreferences {
  preferences: PreferencesResponse;
  /** When the document was last written; null for a user without one. */
  updatedAt: Date | null;
}

// jsonb keeps keys in its own order: answers list them as the API documents them.
const quietHoursOf = (q: PreferencesRow["quiet_hours"]) => q && { start: q.start, end: q.end, tz: q.tz };
const subscriptionOf = ({ endpoint, expirationTime, keys }: PreferencesRow["device_tokens"][number]) => ({
  endpoint,
  ...(expirationTime === undefined ? {} : { expirationTime }),
  keys: { p256dh: keys.p256dh, auth: keys.auth },
});

export const toStoredPreferences = (userId: string, row: PreferencesRow | undefined): StoredPreferences => ({
  preferences: {
    user_id: userId,
    channel_optout: row?.channel_optout ?? [...DEFAULT_PREFERENCES.channel_optout],
    category_optout: row?.category_optout ?? [...DEFAULT_PREFERENCES.category_optout],
    quiet_hours: row ? quietHoursOf(row.quiet_hours) : DEFAULT_PREFERENCES.quiet_hours,
    rate_cap_per_day: row ? row.rate_cap_per_day : DEFAULT_PREFERENCES.rate_cap_per_day,
    device_tokens: (row?.device_tokens ?? []).map(subscriptionOf),
    locale: row ? row.locale : DEFAULT_PREFERENCES.locale,
    time_zone: row ? row.time_zone : DEFAULT_PREFERENCES.time_zone,
  },
  updatedAt: row?.updated_at ?? null,
});

/** GET /api/v1/users/{id}/preferences: the stored document, or the defaults for an unknown user. */
export async function getPreferences(database: Database, userId: string): Promise<StoredPreferences> {
  try {
    return toStoredPreferences(userId, await readPreferences(database, userId));
  } catch (error) {
    throw toAppError(error);
  }
}
