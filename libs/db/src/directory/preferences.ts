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

/** What a user changes of their own document (the inbox's preference centre); absent: unchanged. */
export type PreferencesPatch = Partial<
  Pick<PreferencesInput, "channel_optout" | "category_optout" | "quiet_hours" | "locale" | "time_zone">
>;

/**
 * Changes the fields `patch` names and nothing else, in one statement (creating the document with
 * the defaults otherwise), so a concurrent write of the other fields (the API's device tokens and
 * cap) is never undone. A `category_optout` given replaces the opt-outs except those of
 * `keepCategories` already stored, which stay. Answers what was stored.
 */
export async function patchPreferences(
  database: Database,
  userId: string,
  patch: PreferencesPatch,
  keepCategories: readonly string[],
): Promise<PreferencesRow> {
  const { sql } = database;
  const json = (value: object) => sql.json(value as Parameters<Sql["json"]>[0]);
  const quietHours = patch.quiet_hours ? json(patch.quiet_hours) : null;
  const changed = (field: keyof PreferencesPatch, value: ReturnType<Sql>) =>
    patch[field] === undefined ? sql.unsafe(`p.${field}`) : value;
  const [row] = await sql<PreferencesRow[]>`
    insert into user_preferences as p (user_id, channel_optout, category_optout, quiet_hours, locale, time_zone, updated_at)
    values (${userId}, ${patch.channel_optout ?? []}, ${patch.category_optout ?? []}, ${quietHours},
            ${patch.locale ?? null}, ${patch.time_zone ?? null}, now())
    on conflict (user_id) do update set
      channel_optout = ${changed("channel_optout", sql`excluded.channel_optout`)},
      category_optout = ${changed(
        "category_optout",
        sql`array(
          select distinct c collate "C" from unnest(excluded.category_optout || array(
            select k from unnest(p.category_optout) k where k = any(${keepCategories as string[]}::text[])
          )) c order by 1)`,
      )},
      quiet_hours = ${changed("quiet_hours", sql`excluded.quiet_hours`)},
      locale = ${changed("locale", sql`excluded.locale`)},
      time_zone = ${changed("time_zone", sql`excluded.time_zone`)},
      updated_at = now()
    returning channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, time_zone,
              updated_at`;
  return row as PreferencesRow;
}
