import { GATHER, perIterationOf, unnestColumns } from "../batch.js";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { userContacts, userPreferences } from "../schema/index.js";

type ProfileColumns = RowPick<typeof userContacts, "email" | "phone"> &
  RowPick<
    typeof userPreferences,
    "channel_optout" | "category_optout" | "quiet_hours" | "rate_cap_per_day" | "device_tokens" | "locale"
  >;

/** What routing reads about a user: contacts and preferences, null where the user has no record. */
export type ProfileRow = { [K in keyof ProfileColumns]: ProfileColumns[K] | null };

/**
 * One row whatever the user has: a user without contacts or preferences reads as all nulls.
 * The reads of one event-loop iteration on one database go in one statement.
 */
export const readProfileRow: (database: Database, userId: string) => Promise<ProfileRow> = perIterationOf(
  async (database: Database, userIds: readonly string[]) => {
    const rows = await database.sql<Array<ProfileRow & { user_id: string }>>`
      select u.user_id, c.email, c.phone, p.channel_optout, p.category_optout, p.quiet_hours, p.rate_cap_per_day,
             p.device_tokens, p.locale
      from ${unnestColumns(database.sql, "u", { user_id: ["text", userIds] })}
      left join user_contacts c on c.user_id = u.user_id
      left join user_preferences p on p.user_id = u.user_id`;
    const found = new Map(rows.map(({ user_id, ...row }) => [user_id, row]));
    return userIds.map((id) => found.get(id) as ProfileRow);
  },
  GATHER,
);
