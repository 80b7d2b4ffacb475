import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import { type PreferencesRow, type StoredPreferences, toStoredPreferences } from "./get-preferences.js";
import type { PreferencesRequest } from "./schemas.js";

/**
 * PUT /api/v1/users/{id}/preferences: replaces the document. The processor reads preferences
 * through the notify_prefs cache, so routing sees the change within that bucket's TTL (5 s).
 */
export async function putPreferences(
  database: Database,
  userId: string,
  input: PreferencesRequest,
): Promise<StoredPreferences> {
  const { sql } = database;
  try {
    const [row] = await sql<PreferencesRow[]>`
      insert into user_preferences as p
        (user_id, channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, updated_at)
      values (${userId}, ${input.channel_optout}, ${input.category_optout},
              ${input.quiet_hours ? sql.json(input.quiet_hours) : null}, ${input.rate_cap_per_day},
              ${sql.json(input.device_tokens)}, ${input.locale}, now())
      on conflict (user_id) do update set
        channel_optout = excluded.channel_optout, category_optout = excluded.category_optout,
        quiet_hours = excluded.quiet_hours, rate_cap_per_day = excluded.rate_cap_per_day,
        device_tokens = excluded.device_tokens, locale = excluded.locale, updated_at = now()
      returning channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, updated_at`;
    return toStoredPreferences(userId, row);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
