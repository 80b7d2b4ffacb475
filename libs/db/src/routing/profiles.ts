import type { SuppressionHold } from "@notify/core";
import { GATHER, perIterationOf, unnestColumns } from "../batch.js";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { userContacts, userPreferences } from "../schema/index.js";

type ProfileColumns = RowPick<typeof userContacts, "email" | "phone"> &
  RowPick<
    typeof userPreferences,
    "channel_optout" | "category_optout" | "quiet_hours" | "rate_cap_per_day" | "device_tokens" | "locale" | "time_zone"
  >;

/**
 * What routing reads about a user: contacts and preferences, null where the user has no record,
 * and the suppression list's entries for the user's email address and phone number (every
 * client's: routing keeps those that hold for the notification's client).
 */
export type ProfileRow = { [K in keyof ProfileColumns]: ProfileColumns[K] | null } & {
  suppressions: Array<SuppressionHold & { address: string }>;
};

/**
 * One row whatever the user has: a user without contacts or preferences reads as all nulls (and
 * no suppressions). The reads of one event-loop iteration on one database go in one statement.
 * The contacts are looked up on the list in its form (libs/core suppressionAddress: an email
 * trimmed and lower-cased, a phone number as + and its digits), two lookups by key per user.
 */
export const readProfileRow: (database: Database, userId: string) => Promise<ProfileRow> = perIterationOf(
  async (database: Database, userIds: readonly string[]) => {
    const rows = await database.sql<Array<ProfileRow & { user_id: string }>>`
      select u.user_id, c.email, c.phone, p.channel_optout, p.category_optout, p.quiet_hours, p.rate_cap_per_day,
             p.device_tokens, p.locale, p.time_zone, s.suppressions
      from ${unnestColumns(database.sql, "u", { user_id: ["text", userIds] })}
      left join user_contacts c on c.user_id = u.user_id
      left join user_preferences p on p.user_id = u.user_id
      cross join lateral (
        select coalesce(jsonb_agg(jsonb_build_object('channel', s.channel, 'address', s.address,
                 'client_id', s.client_id, 'reason', s.reason,
                 'created_at', to_char(s.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))), '[]') as suppressions
        from suppressions s
        where (s.channel = 'email'
               and s.address = lower(regexp_replace(c.email, '^[[:space:]]+|[[:space:]]+$', '', 'g')))
           or (s.channel = 'sms'
               and s.address = '+' || regexp_replace(regexp_replace(c.phone, '[[:space:]().-]', '', 'g'), '^[+]', ''))
      ) s`;
    const found = new Map(rows.map(({ user_id, ...row }) => [user_id, row]));
    return userIds.map((id) => found.get(id) as ProfileRow);
  },
  GATHER,
);
