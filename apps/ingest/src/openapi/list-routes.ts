import * as v from "valibot";
import { DeadLetterPage, ListDeadLettersQuery } from "../dead-letters/schemas.js";
import { DEFAULT_LIMIT, ListNotificationsQuery, MAX_LIMIT } from "../notifications/list-schemas.js";
import type { RouteDoc } from "./registry.js";
import { NotificationView } from "./routes.js";

const NotificationPage = v.object({
  data: v.array(NotificationView),
  next_cursor: v.nullable(v.string()),
  has_more: v.boolean(),
});

/** The list endpoints: cursor style for a user's notifications, offset style for dead letters. */
export const LIST_ROUTES: RouteDoc[] = [
  {
    method: "get",
    path: "/users/{id}/notifications",
    summary: "List a user's notifications",
    description: `Newest first (created_at descending, then notification_id), only the calling client's notifications. Cursor pagination: limit ${DEFAULT_LIMIT} by default, larger values clamped to ${MAX_LIMIT}; pass next_cursor back unchanged as cursor, with the same filters, until has_more is false (next_cursor is then null). A cursor is opaque and signed: one that was changed, comes from an older encoding, other filters or another client is a 400 invalid_cursor. Filters: category, status (at least one channel in that status), since (created_at >= since) and until (created_at < until). A best-effort view, not a snapshot: notifications that arrive while paging show up on a later request from the start, never as a repeat or a gap.`,
    tag: "Notifications",
    scope: "read",
    query: ListNotificationsQuery,
    responses: { 200: { description: "One page", schema: NotificationPage } },
    problems: ["validation_failed", "invalid_cursor"],
  },
  {
    method: "get",
    path: "/dead-letters",
    summary: "List dead letters",
    description:
      "Newest first from the dead-letter stream (kept 30 days), offset pagination: page_size 50 by default, clamped to 200; total_count counts the letters matching the filters. Inspect and replay them with `notify dlq`.",
    tag: "Dead letters",
    scope: "admin",
    query: ListDeadLettersQuery,
    responses: { 200: { description: "One page", schema: DeadLetterPage } },
    problems: ["validation_failed"],
  },
];
