import type { Channel } from "@notify/core";
import type { Database, Sql } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { userPreferences } from "../schema/index.js";

// A user's preferences document: the ingest API's reads and writes.

/** A stored preferences document, as the API reads and writes it. */
export type PreferencesRow = Omit<
  RowPick<
    typeof userPreferences,
    | "channel_optout"
    | "category_optout"
    | "quiet_hours"
    | "rate_cap_per_day"
    | "device_tokens"
    | "locale"
    | "time_zone"
    | "updated_at"
  >,
  "channel_optout"
> & { channel_optout: Channel[] };

export type PreferencesInput = Omit<PreferencesRow, "updated_at">;

/** The user's preferences document; undefined for a user without one (the defaults apply). */
export async function readPreferences(database: Database, userId: string): Promise<PreferencesRow | undefined> {
  const [row] = await database.sql<PreferencesRow[]>`
    select channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, time_zone,
           updated_at
    from user_preferences where user_id = ${userId}`;
  return row;
}

/** Replaces the user's preferences document (creating it), answering what was stored. */
export async function writePreferences(
  database: Database,
  userId: string,
  input: PreferencesInput,
): Promise<PreferencesRow> {
  const { sql } = database;
  // The schema's JSON types are interfaces, which postgres.js's JSONValue (an index signature)
  // does not accept though they are plain JSON.
  const json = (value: object) => sql.json(value as Parameters<Sql["json"]>[0]);
  const [row] = await sql<PreferencesRow[]>`
    insert into user_preferences as p
      (user_id, channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, time_zone,
       updated_at)
    values (${userId}, ${input.channel_optout}, ${input.category_optout},
            ${input.quiet_hours ? json(input.quiet_hours) : null}, ${input.rate_cap_per_day},
            ${json(input.device_tokens)}, ${input.locale}, ${input.time_zone}, now())
    on conflict (user_id) do update set
      channel_optout = excluded.channel_optout, category_optout = excluded.category_optout,
      quiet_hours = excluded.quiet_hours, rate_cap_per_day = excluded.rate_cap_per_day,
      device_tokens = excluded.device_tokens, locale = excluded.locale, time_zone = excluded.time_zone,
      updated_at = now()
    returning channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, time_zone,
              updated_at`;
  return row as PreferencesRow;
}

/**
 * Adds a category to the user's opt-outs (creating their document with the defaults otherwise),
 * in one statement, so a repeat or a concurrent preferences write loses nothing. True when the
 * category was not opted out before.
 */
export async function optOutCategory(database: Database, userId: string, category: string): Promise<boolean> {
  const rows = await database.sql<{ user_id: string }[]>`
    insert into user_preferences as p (user_id, category_optout, updated_at)
    values (${userId}, array[${category}]::text[], now())
    on conflict (user_id) do update set
      category_optout = array_append(p.category_optout, ${category}::text), updated_at = now()
      where not (${category}::text = any(p.category_optout))
    returning user_id`;
  return rows.length > 0;
}
