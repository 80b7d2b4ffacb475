import { validate } from "@notify/http";
import type { Hono } from "hono";
import * as v from "valibot";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import { listDeadLetters } from "../dead-letters/list.js";
import { DeadLetterPage, ListDeadLettersQuery } from "../dead-letters/schemas.js";
import type { IngestDeps } from "../deps.js";
import { listUserNotifications } from "../notifications/list.js";
import { DEFAULT_LIMIT, ListNotificationsQuery, MAX_LIMIT } from "../notifications/list-schemas.js";
import { parseUserIdParam } from "../preferences/schemas.js";
import { contract } from "./contract.js";
import { NotificationView } from "./notifications.js";

const NotificationPage = v.object({
  data: v.array(NotificationView),
  next_cursor: v.nullable(v.string()),
  has_more: v.boolean(),
});

/**
 * The spec's two list conventions: a user's notifications by keyset cursor (user-facing, grows
 * while it is read), dead letters by page (an operator's list, with a total).
 */
export function mountLists(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "database" | "bus" | "cursorSecret">): void {
  v1.get(
    "/users/:id/notifications",
    contract({
      summary: "List a user's notifications",
      description: `Newest first (created_at descending, then notification_id), only the calling client's notifications. Cursor pagination: limit ${DEFAULT_LIMIT} by default, larger values clamped to ${MAX_LIMIT}; pass next_cursor back unchanged as cursor, with the same filters, until has_more is false (next_cursor is then null). A cursor is opaque and signed: one that was changed, comes from an older encoding, other filters or another client is a 400 invalid_cursor. Filters: category, status (at least one channel in that status), since (created_at >= since) and until (created_at < until). A best-effort view, not a snapshot: notifications that arrive while paging show up on a later request from the start, never as a repeat or a gap.`,
      tag: "Notifications",
      scope: "read",
      query: ListNotificationsQuery,
      responses: { 200: { description: "One page", schema: NotificationPage } },
      problems: ["validation_failed", "invalid_cursor"],
    }),
    requireScope("read"),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      const query = validate(ListNotificationsQuery, c.req.query());
      return c.json(
        await listUserNotifications(deps.database, deps.cursorSecret, c.get("principal").clientId, userId, query),
      );
    },
  );

  v1.get(
    "/dead-letters",
    contract({
      summary: "List dead letters",
      description:
        "Newest first from the dead-letter stream (kept 30 days), offset pagination: page_size 50 by default, clamped to 200; total_count counts the letters matching the filters. Inspect and replay them with `notify dlq`.",
      tag: "Dead letters",
      scope: "admin",
      query: ListDeadLettersQuery,
      responses: { 200: { description: "One page", schema: DeadLetterPage } },
      problems: ["validation_failed"],
    }),
    requireScope("admin"),
    async (c) => c.json(await listDeadLetters(deps.bus, validate(ListDeadLettersQuery, c.req.query()))),
  );
}
