import type { Database } from "../pool.js";

/**
 * What a user's wall-clock send time is read with: the preference's time zone and the quiet
 * hours' zone (either may be null; a user without preferences has neither).
 */
export async function readUserZones(
  database: Database,
  userId: string,
): Promise<{ timeZone: string | null; quietHoursZone: string | null }> {
  const [row] = await database.sql<{ time_zone: string | null; quiet_tz: string | null }[]>`
    select time_zone, quiet_hours->>'tz' as quiet_tz from user_preferences where user_id = ${userId}`;
  return { timeZone: row?.time_zone ?? null, quietHoursZone: row?.quiet_tz ?? null };
}
