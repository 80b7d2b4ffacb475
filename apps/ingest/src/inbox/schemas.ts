import { INBOX_FILTERS } from "@notify/db";
import * as v from "valibot";

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
);

const Timestamp = v.pipe(v.string(), v.isoTimestamp());
export const InboxItemSchema = v.object({
  id: v.string(),
  notification_id: v.string(),
  category: v.string(),
  title: v.nullable(v.string()),
  body: v.string(),
  created_at: Timestamp,
  seen_at: v.nullable(Timestamp),
  read_at: v.nullable(Timestamp),
  archived_at: v.nullable(Timestamp),
});

export const InboxPage = v.object({
  data: v.array(InboxItemSchema),
  next_cursor: v.nullable(v.string()),
  has_more: v.boolean(),
});
