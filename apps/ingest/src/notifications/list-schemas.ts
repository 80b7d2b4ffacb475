import { CHANNEL_STATUSES, instant, NotificationRequest } from "@notify/core";
import * as v from "valibot";
import { limitParam } from "../pagination.js";

/** Page size of GET /users/{id}/notifications when none is asked for. */
export const DEFAULT_LIMIT = 50;
/** Larger limits are clamped to this, not refused. */
export const MAX_LIMIT = 200;

/** Query of GET /api/v1/users/{id}/notifications (cursor pagination). */
export const ListNotificationsQuery = v.pipe(
  v.strictObject({
    limit: limitParam(DEFAULT_LIMIT, MAX_LIMIT),
    /** The next_cursor of the previous page, unchanged. */
    cursor: v.optional(v.pipe(v.string(), v.maxLength(512, "cursor is not a cursor of this list"))),
    category: v.optional(NotificationRequest.entries.category),
    /** Notifications with at least one channel in this status. */
    status: v.optional(v.picklist(CHANNEL_STATUSES, `status must be one of ${CHANNEL_STATUSES.join(", ")}`)),
    /** created_at >= since. */
    since: v.optional(instant("since")),
    /** created_at < until. */
    until: v.optional(instant("until")),
  }),
  v.check((q) => !q.since || !q.until || q.since < q.until, "since must be earlier than until"),
);
export type ListNotificationsQuery = v.InferOutput<typeof ListNotificationsQuery>;
