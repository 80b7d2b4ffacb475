import {
  CHANNEL_STATUSES,
  CHANNELS,
  NOTIFICATION_STATUS_DESCRIPTIONS,
  NOTIFICATION_STATUSES,
  NotificationRequest,
  PRIORITIES,
  SCOPES,
} from "@notify/core";
import * as v from "valibot";
import { CreateKeyRequest, ListKeysQuery, RotateKeyRequest } from "../keys/schemas.js";
import { ContactsRequest, ContactsResponse, PreferencesRequest, PreferencesResponse } from "../preferences/schemas.js";
import { ListTemplatesQuery, TemplateRequest, TemplateResponse } from "../templates/schemas.js";
import type { RouteDoc } from "./registry.js";

// Response shapes. Requests are described by the very schemas the handlers validate with.

const Timestamp = v.pipe(v.string(), v.isoTimestamp());

const Accepted = v.object({ notification_id: v.string(), status: v.literal("accepted") });

const ChannelResult = v.object({
  status: v.picklist(CHANNEL_STATUSES),
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
const KeyPage = v.object({
  data: v.array(ApiKeyRecord),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});

const idempotencyKey = {
  name: "Idempotency-Key",
  required: true,
  description:
    "The upstream event id (a UUID); a repeat within 24 h returns the first result (IETF Idempotency-Key draft).",
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
  },
  {
    method: "get",
    path: "/notifications/{id}",
    summary: "Read a notification's status",
    description:
      "`status` sums the channels up (accepted, processing, unsettled, completed, partially_failed, failed, suppressed; see its schema); `channels` has each channel's own status, reason and provider id.",
    tag: "Notifications",
    scope: "read",
    responses: {
      200: { description: "The notification and its per-channel delivery results", schema: NotificationView },
    },
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
    responses: {
      201: { description: "The new key, shown once", schema: IssuedKey, headers: { Location: "The key's URL" } },
    },
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
    description:
      "Issues a replacement with the same client, scopes and limits; the old key works until the grace period ends.",
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

const TemplatePage = v.object({
  data: v.array(TemplateResponse),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});
const bodyProblems = ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"] as const;

export const USER_ROUTES: RouteDoc[] = [
  {
    method: "get",
    path: "/users/{id}/preferences",
    summary: "Read a user's preferences",
    description: "A user without a stored document gets the defaults (no opt-outs, no quiet hours, no cap).",
    tag: "Users",
    scope: "preferences",
    responses: {
      200: {
        description: "The preferences document",
        schema: PreferencesResponse,
        headers: { "Last-Modified": "When it was last replaced" },
      },
    },
    problems: ["validation_failed"],
  },
  {
    method: "put",
    path: "/users/{id}/preferences",
    summary: "Replace a user's preferences",
    description:
      "Replaces the whole document. Quiet hours are HH:MM in an IANA time zone (a window may cross midnight); device tokens are Web Push subscriptions. The processor sees a change within 5 s.",
    tag: "Users",
    scope: "preferences",
    body: PreferencesRequest,
    responses: { 200: { description: "The stored document", schema: PreferencesResponse } },
    problems: [...bodyProblems],
  },
  {
    method: "get",
    path: "/users/{id}/contacts",
    summary: "Read a user's contact addresses",
    tag: "Users",
    scope: "preferences",
    responses: { 200: { description: "Email address and phone number", schema: ContactsResponse } },
    problems: ["validation_failed"],
  },
  {
    method: "put",
    path: "/users/{id}/contacts",
    summary: "Replace a user's contact addresses",
    description: "The addresses the email and SMS channels deliver to; the phone number is E.164.",
    tag: "Users",
    scope: "preferences",
    body: ContactsRequest,
    responses: { 200: { description: "The stored addresses", schema: ContactsResponse } },
    problems: [...bodyProblems],
  },
];

export const TEMPLATE_ROUTES: RouteDoc[] = [
  {
    method: "get",
    path: "/templates",
    summary: "List templates",
    tag: "Templates",
    scope: "admin",
    query: ListTemplatesQuery,
    responses: {
      200: { description: "A page of templates at their latest version (offset pagination)", schema: TemplatePage },
    },
    problems: ["validation_failed"],
  },
  {
    method: "get",
    path: "/templates/{id}",
    summary: "Read a template's latest version",
    tag: "Templates",
    scope: "admin",
    responses: { 200: { description: "The latest version", schema: TemplateResponse } },
    problems: ["validation_failed", "not_found"],
  },
  {
    method: "get",
    path: "/templates/{id}/versions/{version}",
    summary: "Read one version of a template",
    tag: "Templates",
    scope: "admin",
    responses: { 200: { description: "That version", schema: TemplateResponse } },
    problems: ["validation_failed", "not_found"],
  },
  {
    method: "put",
    path: "/templates/{id}",
    summary: "Write a template's next version",
    description:
      "Versions are immutable: every change writes the next one, and identical content writes nothing. Bodies are eta templates (code), so only admin keys may write them; they must compile and declare their data parameters.",
    tag: "Templates",
    scope: "admin",
    body: TemplateRequest,
    responses: {
      201: {
        description: "A new version was written",
        schema: TemplateResponse,
        headers: { Location: "The version's URL" },
      },
      200: { description: "The content equals the latest version: nothing written", schema: TemplateResponse },
    },
    problems: [...bodyProblems],
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
