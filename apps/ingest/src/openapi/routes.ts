import { CHANNEL_STATUSES, CHANNELS, NotificationRequest, PRIORITIES, SCOPES } from "@notify/core";
import * as v from "valibot";
import { CreateKeyRequest, ListKeysQuery, RotateKeyRequest } from "../keys/schemas.js";
import type { RouteDoc } from "./registry.js";

// Response shapes. Requests are described by the very schemas the handlers validate with.

const Timestamp = v.pipe(v.string(), v.isoTimestamp());

const Accepted = v.object({ notification_id: v.string(), status: v.literal("accepted") });

const ChannelResult = v.object({
  status: v.picklist(CHANNEL_STATUSES),
  provider_id: v.nullable(v.string()),
  reason: v.nullable(v.string()),
  ts: Timestamp,
});

const NotificationView = v.object({
  notification_id: v.string(),
  user_id: v.string(),
  category: v.string(),
  template_id: v.string(),
  priority: v.picklist(PRIORITIES),
  status: v.literal("accepted"),
  created_at: Timestamp,
  channels: v.record(v.picklist(CHANNELS), ChannelResult),
});

const ApiKeyRecord = v.object({
  id: v.string(),
  client_id: v.string(),
  name: v.string(),
  prefix: v.string(),
  scopes: v.array(v.picklist(SCOPES)),
  rate_limit: v.nullable(v.object({ burst: v.number(), per_second: v.number() })),
  status: v.picklist(["active", "grace", "revoked"]),
  created_at: Timestamp,
  revoked_at: v.nullable(Timestamp),
  last_used_at: v.nullable(Timestamp),
});
const IssuedKey = v.object({ ...ApiKeyRecord.entries, key: v.string() });
const RotatedKey = v.object({ ...IssuedKey.entries, previous: ApiKeyRecord });
const KeyPage = v.object({ data: v.array(ApiKeyRecord), page: v.number(), page_size: v.number(), total_count: v.number() });

const idempotencyKey = {
  name: "Idempotency-Key",
  required: true,
  description: "The upstream event id (a UUID); a repeat within 24 h returns the first result (IETF Idempotency-Key draft).",
};

export const NOTIFICATION_ROUTES: RouteDoc[] = [
  {
    method: "post",
    path: "/notifications",
    summary: "Send a notification",
    description:
      "Validates, stores and queues the notification; answers 202 only after it is committed and acknowledged by the queue. Delivery is asynchronous: read GET /notifications/{id} for per-channel results.",
    tag: "Notifications",
    scope: "ingest",
    body: NotificationRequest,
    headers: [idempotencyKey],
    responses: {
      202: { description: "Accepted and durably queued", schema: Accepted, headers: { Location: "The notification's URL" } },
      200: {
        description: "The Idempotency-Key was seen within 24 h with the same body: the existing notification, nothing enqueued",
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
  },
  {
    method: "get",
    path: "/notifications/{id}",
    summary: "Read a notification's status",
    tag: "Notifications",
    scope: "read",
    responses: { 200: { description: "The notification and its per-channel delivery results", schema: NotificationView } },
    problems: ["not_found"],
  },
];

export const KEY_ROUTES: RouteDoc[] = [
  {
    method: "post",
    path: "/keys",
    summary: "Issue an API key",
    description: "The plaintext key is in this answer only; the service stores its SHA-256.",
    tag: "API keys",
    scope: "admin",
    body: CreateKeyRequest,
    responses: { 201: { description: "The new key, shown once", schema: IssuedKey, headers: { Location: "The key's URL" } } },
    problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"],
  },
  {
    method: "get",
    path: "/keys",
    summary: "List API keys",
    tag: "API keys",
    scope: "admin",
    query: ListKeysQuery,
    responses: { 200: { description: "A page of keys, newest first (offset pagination)", schema: KeyPage } },
    problems: ["validation_failed"],
  },
  {
    method: "get",
    path: "/keys/{id}",
    summary: "Read an API key",
    tag: "API keys",
    scope: "admin",
    responses: { 200: { description: "The key's record (never the key or its hash)", schema: ApiKeyRecord } },
    problems: ["not_found"],
  },
  {
    method: "post",
    path: "/keys/{id}/rotate",
    summary: "Rotate an API key",
    description: "Issues a replacement with the same client, scopes and limits; the old key works until the grace period ends.",
    tag: "API keys",
    scope: "admin",
    body: RotateKeyRequest,
    responses: { 201: { description: "The new key, shown once, and the old key's record", schema: RotatedKey } },
    problems: ["validation_failed", "malformed_json", "not_found", "payload_too_large", "unsupported_media_type"],
  },
  {
    method: "delete",
    path: "/keys/{id}",
    summary: "Revoke an API key",
    tag: "API keys",
    scope: "admin",
    responses: { 204: { description: "Revoked" } },
    problems: ["not_found"],
  },
];

export const DOC_ROUTES: RouteDoc[] = [
  {
    method: "get",
    path: "/openapi.json",
    summary: "This OpenAPI document",
    tag: "Meta",
    scope: null,
    responses: { 200: { description: "OpenAPI 3.1" } },
    problems: [],
  },
  {
    method: "get",
    path: "/docs",
    summary: "A readable page of this API",
    tag: "Meta",
    scope: null,
    responses: { 200: { description: "HTML" } },
    problems: [],
  },
];
