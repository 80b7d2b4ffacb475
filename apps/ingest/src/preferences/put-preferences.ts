import { type Database, writePreferences } from "@notify/db";
import { toAppError } from "@notify/http";
import { type StoredPreferences, toStoredPreferences } from "./get-preferences.js";
import type { PreferencesRequest } from "./schemas.js";

/**
 * PUT /api/v1/users/{id}/preferences: replaces the document. The route announces the change, so
 * the processors drop the user's cached profile; one that missed it reads the document again
 * within PREFERENCE_CACHE_TTL_MS (5 s).
 */
export async function putPreferences(
  database: Database,
  userId: string,
  input: PreferencesRequest,
): Promise<StoredPreferences> {
  try {
    const row = await writePreferences(database, userId, {
      channel_optout: input.channel_optout,
      category_optout: input.category_optout,
      quiet_hours: input.quiet_hours,
      rate_cap_per_day: input.rate_cap_per_day,
      device_tokens: input.device_tokens,
      locale: input.locale,
      time_zone: input.time_zone,
    });
    return toStoredPreferences(userId, row);
  } catch (error) {
    throw toAppError(error);
  }
}
