import { CHANNELS } from "@notify/core";
import { INBOX_FILTERS, INBOX_MARK_ACTIONS } from "@notify/db";
import * as v from "valibot";
import { CategoryOptout, ChannelOptout, Locale, QuietHours, TimeZone } from "../preferences/schemas.js";

export const IssueInboxTokenRequest = v.object({
  /** How long the token is valid; the client asks for a new one through its backend after. */
  ttl_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(60), v.maxValue(86_400)), 3600),
});

export const InboxTokenResponse = v.object({
  token: v.pipe(
    v.string(),
    v.metadata({ description: "The token, for the user's client to send in X-Inbox-Token; shown once" }),
  ),
  token_id: v.pipe(
    v.string(),
    v.metadata({ description: "What DELETE /users/{id}/inbox-tokens/{tokenId} names to revoke this token alone" }),
  ),
  user_id: v.string(),
  expires_at: v.pipe(v.string(), v.isoTimestamp()),
});

export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 100;

export const InboxQuery = v.object({
  /** Page size: 20 by default, larger values are clamped to 100. */
  limit: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, "must be a positive integer"),
      v.transform(Number),
      v.minValue(1, "must be a positive integer"),
      v.transform((n) => Math.min(n, MAX_PAGE)),
    ),
    String(DEFAULT_PAGE),
  ),
  cursor: v.optional(v.pipe(v.string(), v.maxLength(512))),
  /** inbox (not archived, the default), unread, archived or all. */
  filter: v.optional(v.picklist(INBOX_FILTERS), "inbox"),
});

// The schemas a user's client sends and reads carry a `ref`: the OpenAPI document names them
// (components/schemas), and the typed inbox client is generated from those names.

export const InboxItemUpdate = v.pipe(
  v.strictObject({
    seen: v.optional(v.boolean()),
    read: v.optional(v.boolean()),
    archived: v.optional(v.boolean()),
  }),
  v.check(
    (u) => u.seen !== undefined || u.read !== undefined || u.archived !== undefined,
    "set seen, read or archived",
  ),
  v.metadata({ ref: "InboxItemUpdate" }),
);

const Timestamp = v.pipe(v.string(), v.isoTimestamp());
export const InboxItemSchema = v.pipe(
  v.object({
    id: v.string(),
    notification_id: v.string(),
    category: v.string(),
    title: v.nullable(v.string()),
    body: v.string(),
    created_at: Timestamp,
    seen_at: v.nullable(Timestamp),
    read_at: v.nullable(Timestamp),
    archived_at: v.nullable(Timestamp),
  }),
  v.metadata({ ref: "InboxItem" }),
);

export const InboxPage = v.pipe(
  v.object({
    data: v.array(InboxItemSchema),
    next_cursor: v.nullable(v.string()),
    has_more: v.boolean(),
  }),
  v.metadata({ ref: "InboxPage" }),
);

const count = (description: string) => v.pipe(v.number(), v.integer(), v.minValue(0), v.metadata({ description }));

/** The owner's counts: what a badge shows. */
export const InboxCountsSchema = v.pipe(
  v.strictObject({
    unread: count("Items not archived and not read"),
    unseen: count("Items not archived and not seen"),
    total: count("Items not archived"),
  }),
  v.metadata({ ref: "InboxCounts" }),
);

/** An item id as the API writes it: digits, in a string. */
const ItemId = v.pipe(v.string("must be an item id, a string of digits"), v.regex(/^\d{1,18}$/, "must be an item id"));

/** Body of POST /inbox/mark-all. */
export const InboxMarkAllRequest = v.pipe(
  v.strictObject({
    action: v.picklist(INBOX_MARK_ACTIONS, `action must be one of ${INBOX_MARK_ACTIONS.join(", ")}`),
    before_id: v.optional(
      v.pipe(
        ItemId,
        v.metadata({
          description:
            "Only the items up to and including this id (the newest the user was shown): one stored after it stays as it is.",
        }),
      ),
    ),
  }),
  v.metadata({ ref: "InboxMarkAll" }),
);

/** A category of the preference centre. */
export const InboxCategorySchema = v.pipe(
  v.strictObject({
    category: v.string(),
    opted_out: v.pipe(v.boolean(), v.metadata({ description: "Whether the user refuses it (never for a locked one)" })),
    locked: v.pipe(
      v.boolean(),
      v.metadata({ description: "A critical category (CRITICAL_CATEGORIES): always sent, cannot be opted out of" }),
    ),
  }),
  v.metadata({ ref: "InboxCategory" }),
);

/** What the user may see and change of their preferences. */
export const InboxPreferencesSchema = v.pipe(
  v.strictObject({
    channel_optout: v.array(v.picklist(CHANNELS)),
    category_optout: v.pipe(
      v.array(v.string()),
      v.metadata({ description: "The categories the user refuses; a critical category is never listed" }),
    ),
    quiet_hours: v.nullable(QuietHours),
    time_zone: v.nullable(v.string()),
    locale: v.nullable(v.string()),
    categories: v.pipe(
      v.array(InboxCategorySchema),
      v.metadata({
        description:
          "The categories to show: those this client sent the user lately, those the user refuses, and the critical ones (locked), in code-point order",
      }),
    ),
  }),
  v.metadata({ ref: "InboxPreferences" }),
);

/**
 * Body of PATCH /inbox/preferences: the fields sent replace theirs, the others stay (quiet_hours
 * is sent whole, or null). The validators are the server-side preferences API's own.
 */
export const InboxPreferencesUpdate = v.pipe(
  v.strictObject({
    channel_optout: v.optional(ChannelOptout),
    category_optout: v.optional(CategoryOptout),
    quiet_hours: v.optional(v.nullable(QuietHours)),
    time_zone: v.optional(v.nullable(TimeZone)),
    locale: v.optional(v.nullable(Locale)),
  }),
  v.metadata({ ref: "InboxPreferencesUpdate" }),
);
export type InboxPreferencesUpdate = v.InferOutput<typeof InboxPreferencesUpdate>;
