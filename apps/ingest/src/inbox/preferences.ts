import { AppError } from "@notify/core";
import {
  type Database,
  type InboxOwner,
  type PreferencesRow,
  patchPreferences,
  readPreferences,
  recentInboxCategories,
} from "@notify/db";
import type * as v from "valibot";
import type { InboxPreferencesSchema, InboxPreferencesUpdate } from "./schemas.js";

/** How many of the client's newest notifications (and inbox items) name the categories shown. */
export const RECENT_CATEGORIES = 1000;

export type InboxPreferences = v.InferOutput<typeof InboxPreferencesSchema>;

export interface InboxPreferencesAnswer {
  preferences: InboxPreferences;
  /** When the document was last written; null for a user without one. */
  updatedAt: Date | null;
}

/**
 * The user's preference centre: the part of their preferences document a user may change
 * (opt-outs, quiet hours, time zone, locale; never the device tokens or the cap the API sets),
 * and the categories to show. The document is the user's, not a client's, as on the server-side
 * API: an opt-out holds for every client's notifications. A critical category (routing ignores
 * opt-outs of it) is listed locked and never as opted out, even if the API stored an opt-out of
 * it; only the categories are the client's own: those it sent the user lately.
 */
function viewOf(
  row: PreferencesRow | undefined,
  recent: readonly string[],
  critical: ReadonlySet<string>,
): InboxPreferencesAnswer {
  const optedOut = (row?.category_optout ?? []).filter((category) => !critical.has(category));
  const refused = new Set(optedOut);
  const shown = [...new Set([...recent, ...optedOut, ...critical])].sort();
  const quietHours = row?.quiet_hours ?? null;
  return {
    preferences: {
      channel_optout: row?.channel_optout ?? [],
      category_optout: optedOut,
      // jsonb keeps keys in its own order: answers list them as the API documents them.
      quiet_hours: quietHours && { start: quietHours.start, end: quietHours.end, tz: quietHours.tz },
      time_zone: row?.time_zone ?? null,
      locale: row?.locale ?? null,
      categories: shown.map((category) => ({
        category,
        opted_out: refused.has(category),
        locked: critical.has(category),
      })),
    },
    updatedAt: row?.updated_at ?? null,
  };
}

/** GET /inbox/preferences: the defaults for a user without a document. */
export async function readInboxPreferences(
  database: Database,
  owner: InboxOwner,
  criticalCategories: readonly string[],
): Promise<InboxPreferencesAnswer> {
  const [row, recent] = await Promise.all([
    readPreferences(database, owner.userId),
    recentInboxCategories(database, owner, RECENT_CATEGORIES),
  ]);
  return viewOf(row, recent, new Set(criticalCategories));
}

/**
 * PATCH /inbox/preferences: the fields sent replace theirs in one statement, the rest of the
 * document stays (a concurrent PUT of the cap or the device tokens is never undone). An opt-out of
 * a critical category is refused before anything is written, naming it. Routing reads the same
 * document as after a PUT /users/{id}/preferences; the route announces the change as that one does.
 */
export async function changeInboxPreferences(
  database: Database,
  owner: InboxOwner,
  patch: InboxPreferencesUpdate,
  criticalCategories: readonly string[],
): Promise<{ answer: InboxPreferencesAnswer; changed: string[] }> {
  const locked = (patch.category_optout ?? []).filter((category) => criticalCategories.includes(category));
  if (locked.length > 0) {
    const names = locked.map((category) => `"${category}"`).join(", ");
    const message = `${names} ${locked.length === 1 ? "is a critical category" : "are critical categories"}, always sent: ${locked.length === 1 ? "it" : "they"} cannot be opted out of`;
    throw new AppError("validation_failed", `category_optout: ${message}`, {
      fields: [{ field: "category_optout", message }],
    });
  }
  const changed = Object.keys(patch).filter((field) => patch[field as keyof InboxPreferencesUpdate] !== undefined);
  if (changed.length === 0) return { answer: await readInboxPreferences(database, owner, criticalCategories), changed };
  const [row, recent] = await Promise.all([
    patchPreferences(database, owner.userId, patch, criticalCategories),
    recentInboxCategories(database, owner, RECENT_CATEGORIES),
  ]);
  return { answer: viewOf(row, recent, new Set(criticalCategories)), changed };
}
