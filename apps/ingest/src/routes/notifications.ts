import {
  AppError,
  CHANNEL_STATUSES,
  CHANNELS,
  FALLBACK_CONDITIONS,
  NOTIFICATION_STATUS_DESCRIPTIONS,
  NOTIFICATION_STATUSES,
  NotificationRequest,
  PRIORITIES,
  validate,
} from "@notify/core";
import { jsonResponse, limitBody, readJson } from "@notify/http";
import type { Hono } from "hono";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getNotification } from "../notifications/get.js";
import { listUserNotifications } from "../notifications/list.js";
import { DEFAULT_LIMIT, ListNotificationsQuery, MAX_LIMIT } from "../notifications/list-schemas.js";
import { parseUserIdParam } from "../preferences/schemas.js";
import { contract, Timestamp } from "./contract.js";

// Response shapes. Requests are described by the very schemas the handlers validate with.

const Accepted = v.object({ notification_id: v.string(), status: v.literal("accepted") });

const ChannelResult = v.object({
  status: v.picklist(CHANNEL_STATUSES),
  provider: v.pipe(
    v.nullable(v.string()),
    v.metadata({ description: "The provider that took the send (email may fail over to a second one)" }),
  ),
  provider_id: v.nullable(v.string()),
  reason: v.nullable(v.string()),
  ts: Timestamp,
  next_attempt_at: v.nullable(Timestamp),
});

/** The top-level status: an enum, each value explained (x-enum-descriptions, in enum order). */
const NotificationStatus = v.pipe(
  v.picklist(NOTIFICATION_STATUSES),
  v.metadata({
    description: `Derived from the channels' statuses, exactly one applies: ${NOTIFICATION_STATUSES.map(
      (status) => `\`${status}\`: ${NOTIFICATION_STATUS_DESCRIPTIONS[status]}`,
    ).join(
      "; ",
    )}. Only a bounce receipt still changes completed, partially_failed or failed (a delivered channel may bounce later).`,
    "x-enum-descriptions": NOTIFICATION_STATUSES.map((status) => NOTIFICATION_STATUS_DESCRIPTIONS[status]),
  }),
);

export const NotificationView = v.object({
  notification_id: v.string(),
  user_id: v.string(),
  category: v.string(),
  template_id: v.string(),
  priority: v.picklist(PRIORITIES),
  status: NotificationStatus,
  created_at: Timestamp,
  deliver_by: v.pipe(
    v.nullable(Timestamp),
    v.metadata({ description: "Never sent after this instant: what is unsent then is expired" }),
  ),
  send_at: v.pipe(
    v.nullable(Timestamp),
    v.metadata({
      description:
        "Routed no earlier than this instant: the request's send_at, or its send_at_local resolved in the user's time zone when it was accepted; null: routed at once",
    }),
  ),
  send_at_local: v.pipe(
    v.nullable(v.object({ time: v.string(), date: v.optional(v.string()) })),
    v.metadata({ description: "The wall-clock send time the request gave; null: none" }),
  ),
  digest: v.pipe(
    v.nullable(
      v.object({
        id: v.string(),
        key: v.string(),
        status: v.pipe(
          v.picklist(["open", "closed", "sent"]),
          v.metadata({ description: "open: collecting; closed: full, about to be sent; sent" }),
        ),
        item_count: v.number(),
        closes_at: Timestamp,
        notification_id: v.pipe(
          v.nullable(v.string()),
          v.metadata({ description: "The digest's own notification, once sent: GET it for its channels and timeline" }),
        ),
        role: v.pipe(
          v.picklist(["item", "digest"]),
          v.metadata({ description: "item: this notification joined the digest; digest: this is the digest's own" }),
        ),
      }),
    ),
    v.metadata({
      description:
        "The digest this notification joined, or sends; null: neither. An item has no channels of its own: its status is its digest's notification's (processing until that one is routed)",
    }),
  ),
  channels: v.record(v.picklist(CHANNELS), ChannelResult),
  trace_id: v.pipe(
    v.nullable(v.string()),
    v.metadata({
      description:
        "The trace its ingest request started (32 lower-case hex digits, the trace id of the W3C traceparent), for a trace viewer; null when tracing was off",
    }),
  ),
});

const TimelineEntry = v.variant("event", [
  v.object({ event: v.literal("accepted"), at: Timestamp }),
  v.pipe(
    v.object({
      event: v.literal("routed"),
      at: Timestamp,
      channel: v.picklist(CHANNELS),
      status: v.picklist(CHANNEL_STATUSES),
      reason: v.nullable(v.string()),
    }),
    v.metadata({
      description:
        "The routing decision for the channel, as it was made: pending (to be sent), or suppressed, deferred or expired with the reason (an opt-out, quiet hours, the daily cap, no address)",
    }),
  ),
  v.object({
    event: v.literal("attempt"),
    at: Timestamp,
    channel: v.picklist(CHANNELS),
    attempt: v.number(),
    provider: v.nullable(v.string()),
    outcome: v.string(),
    provider_id: v.nullable(v.string()),
    error: v.nullable(v.string()),
  }),
  v.object({
    event: v.literal("status"),
    at: Timestamp,
    channel: v.picklist(CHANNELS),
    status: v.picklist(CHANNEL_STATUSES),
    reason: v.nullable(v.string()),
    attempt: v.number(),
    provider_id: v.nullable(v.string()),
  }),
  v.object({
    event: v.literal("fallback"),
    at: Timestamp,
    channel: v.picklist(CHANNELS),
    from: v.picklist(CHANNELS),
    because: v.picklist(FALLBACK_CONDITIONS),
  }),
  v.object({
    event: v.literal("provider_switch"),
    at: Timestamp,
    channel: v.picklist(CHANNELS),
    from: v.string(),
    to: v.string(),
  }),
  v.object({
    event: v.literal("receipt"),
    at: Timestamp,
    channel: v.picklist(CHANNELS),
    provider: v.string(),
    receipt: v.pipe(
      v.string(),
      v.metadata({ description: "The provider's event: delivered, bounce, dropped, undelivered, failed..." }),
    ),
    provider_id: v.string(),
    reason: v.optional(v.string()),
  }),
]);

export const NotificationDetail = v.object({
  ...NotificationView.entries,
  timeline: v.pipe(
    v.array(TimelineEntry),
    v.metadata({
      description:
        "Oldest first: accepted (when it was accepted) first, then the latest 200 of: each provider call (attempt: provider, outcome, error), each status a channel took after routing (a routing decision with its reason, e.g. suppressed: opted out), each step of the channel fallback chain taken, each switch of provider between attempts, and each provider receipt about a send (receipt: the provider's event, when it was received)",
    }),
  ),
});

const NotificationPage = v.object({
  data: v.array(NotificationView),
  next_cursor: v.nullable(v.string()),
  has_more: v.boolean(),
});

/** Idempotency-Key (IETF draft): a Structured Field String; a bare token is accepted too. */
const IDEMPOTENCY_KEY = /^"?([\x21\x23-\x5b\x5d-\x7e]{1,255})"?$/;

export function parseIdempotencyKey(header: string | undefined): string {
  const value = header?.trim() ?? "";
  if (value === "") {
    throw new AppError(
      "idempotency_key_missing",
      "the Idempotency-Key header is required (the upstream event id, a UUID)",
    );
  }
  const match = IDEMPOTENCY_KEY.exec(value);
  const quoted = value.startsWith('"');
  if (!match || quoted !== value.endsWith('"') || (quoted && value.length < 3)) {
    throw new AppError("idempotency_key_invalid", "Idempotency-Key must be 1-255 printable characters, e.g. a UUID");
  }
  return match[1] as string;
}

export function mountNotifications(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  v1.post(
    "/notifications",
    contract({
      summary: "Send a notification",
      description:
        "Validates, stores and queues the notification; answers 202 only after it is committed and acknowledged by the queue. Delivery is asynchronous: read GET /notifications/{id} for per-channel results.",
      tag: "Notifications",
      scope: "ingest",
      body: NotificationRequest,
      headers: [
        {
          name: "Idempotency-Key",
          required: true,
          description:
            "The upstream event id (a UUID); a repeat within 24 h returns the first result (IETF Idempotency-Key draft).",
        },
      ],
      responses: {
        202: {
          description: "Accepted and durably queued",
          schema: Accepted,
          headers: { Location: "The notification's URL" },
        },
        200: {
          description:
            "The Idempotency-Key was seen within 24 h with the same body: the existing notification, nothing enqueued",
          schema: Accepted,
          headers: { "Idempotent-Replayed": "true" },
        },
      },
      problems: [
        "validation_failed",
        "malformed_json",
        "idempotency_key_missing",
        "idempotency_key_invalid",
        "unknown_template",
        "template_data_invalid",
        "idempotency_key_in_use",
        "idempotency_key_reused",
        "payload_too_large",
        "unsupported_media_type",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const idempotencyKey = parseIdempotencyKey(c.req.header("idempotency-key"));
      const request = validate(NotificationRequest, await readJson(c));
      const result = await deps.ingestor.create({ clientId: c.get("principal").clientId, idempotencyKey, request });
      const accepted = { notification_id: result.notificationId, status: "accepted" };
      if (result.kind === "replayed") return jsonResponse(c, accepted, 200, { "idempotent-replayed": "true" });
      return jsonResponse(c, accepted, 202, { location: `/api/v1/notifications/${result.notificationId}` });
    },
  );

  v1.get(
    "/notifications/:id",
    contract({
      summary: "Read a notification's status",
      description:
        "`status` sums the channels up (accepted, processing, unsettled, completed, partially_failed, failed, suppressed, canceled; see its schema); `channels` has each channel's own status, reason and provider id.",
      tag: "Notifications",
      scope: "read",
      responses: {
        200: {
          description: "The notification, its per-channel delivery results and its history",
          schema: NotificationDetail,
        },
      },
      problems: ["not_found"],
    }),
    async (c) => c.json(await getNotification(deps.database, c.get("principal").clientId, c.req.param("id"))),
  );

  // A user's notifications by keyset cursor: the list is user-facing and grows while it is read.
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
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      const query = validate(ListNotificationsQuery, c.req.query());
      return c.json(
        await listUserNotifications(deps.database, deps.cursorSecret, c.get("principal").clientId, userId, query),
      );
    },
  );
}
