import * as v from "valibot";
import {
  InboxItemSchema,
  InboxItemUpdate,
  InboxPage,
  InboxQuery,
  InboxTokenResponse,
  IssueInboxTokenRequest,
} from "../inbox/schemas.js";
import type { RouteDoc } from "./registry.js";

const inboxToken = {
  name: "X-Inbox-Token",
  required: true,
  description:
    "The user's token from POST /users/{id}/inbox-tokens; no API key is needed (or used) here, and the token is refused in the URL.",
};

/** What the inbox routes answer the wrong credential with (a token in the URL, an API key, none). */
const INBOX_AUTH_PROBLEMS = ["invalid_request", "unauthenticated"] as const;

/** The in-app gateway: token issuing (API key) and the user-facing inbox and stream (inbox token). */
export const INBOX_ROUTES: RouteDoc[] = [
  {
    method: "post",
    path: "/users/{id}/inbox-tokens",
    summary: "Issue an inbox token for a user",
    description:
      "For the upstream service to hand to that user's client (an API key names an application, never a user). The token reads and streams that user's inbox only, until it expires (ttl_seconds, 60-86400, 1 h by default). Only its SHA-256 is stored.",
    tag: "Inbox",
    scope: "preferences",
    body: IssueInboxTokenRequest,
    responses: {
      201: {
        description: "The token, shown once",
        schema: InboxTokenResponse,
        headers: { "Cache-Control": "no-store" },
      },
    },
    problems: ["validation_failed", "malformed_json", "unsupported_media_type", "payload_too_large"],
  },
  {
    method: "get",
    path: "/inbox",
    summary: "List the user's inbox",
    description:
      "Newest first, cursor pagination (limit 20 by default, clamped to 100; next_cursor and has_more). filter: inbox (not archived), unread, archived or all. A cursor from another filter, user or version is a 400.",
    tag: "Inbox",
    scope: null,
    query: InboxQuery,
    headers: [inboxToken],
    responses: { 200: { description: "One page", schema: InboxPage } },
    problems: ["validation_failed", ...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
  },
  {
    method: "patch",
    path: "/inbox/{itemId}",
    summary: "Set an item's seen, read or archived state",
    description: "true sets the state (the first time is kept), false clears it. Another user's item is a 404.",
    tag: "Inbox",
    scope: null,
    body: InboxItemUpdate,
    headers: [inboxToken],
    responses: { 200: { description: "The item", schema: InboxItemSchema } },
    problems: [
      "validation_failed",
      "malformed_json",
      "unsupported_media_type",
      "payload_too_large",
      "not_found",
      ...INBOX_AUTH_PROBLEMS,
      "dependency_unavailable",
    ],
  },
  {
    method: "get",
    path: "/inbox/stream",
    summary: "Stream new inbox items (Server-Sent Events)",
    description:
      "text/event-stream: a `ready` event, then one `notification` event per new item (id = the item id, data = the item). Reconnect with Last-Event-ID to receive everything stored after it; without it the stream starts at what is new.",
    tag: "Inbox",
    scope: null,
    headers: [
      inboxToken,
      {
        name: "Last-Event-ID",
        required: false,
        description: "Resume after this item id (EventSource sends it on reconnect).",
      },
    ],
    responses: { 200: { description: "An event stream", schema: v.string(), contentType: "text/event-stream" } },
    problems: ["validation_failed", ...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
  },
];
