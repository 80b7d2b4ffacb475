import { BroadcastAccepted, BroadcastRequest, BroadcastView } from "../broadcasts/schemas.js";
import type { RouteDoc } from "./registry.js";

const idempotencyKey = {
  name: "Idempotency-Key",
  required: true,
  description:
    "Required; a repeat with the same body returns the same broadcast (200, Idempotent-Replayed), another body is a 422.",
};

/** Broadcasts: one promotional notification per member of an audience (spec rule 11). */
export const BROADCAST_ROUTES: RouteDoc[] = [
  {
    method: "post",
    path: "/broadcasts",
    summary: "Broadcast to an audience",
    description:
      "Always promotional. The processor expands it in batches into one notification per member (each with its own notification_id, preferences applied per recipient), resuming after a crash where it stopped: every member gets exactly one. Members added before the expansion reaches them are included.",
    tag: "Broadcasts",
    scope: "admin",
    body: BroadcastRequest,
    headers: [idempotencyKey],
    responses: {
      202: {
        description: "Accepted; expansion starts",
        schema: BroadcastAccepted,
        headers: { Location: "Its progress" },
      },
      200: {
        description: "The Idempotency-Key was used with the same body: the existing broadcast",
        schema: BroadcastAccepted,
        headers: { "Idempotent-Replayed": "true" },
      },
    },
    problems: [
      "validation_failed",
      "malformed_json",
      "idempotency_key_missing",
      "idempotency_key_invalid",
      "idempotency_key_reused",
      "unknown_template",
      "template_data_invalid",
      "payload_too_large",
      "unsupported_media_type",
    ],
  },
  {
    method: "get",
    path: "/broadcasts/{id}",
    summary: "Read a broadcast's progress",
    description:
      "total (members when accepted), expanded (notifications created), and per recipient: delivered on at least one channel, failed (no delivery, a failed or bounced channel), suppressed (every channel suppressed).",
    tag: "Broadcasts",
    scope: "admin",
    responses: { 200: { description: "Its progress", schema: BroadcastView } },
    problems: ["not_found"],
  },
  {
    method: "post",
    path: "/broadcasts/{id}/cancel",
    summary: "Cancel a broadcast",
    description:
      "Stops the expansion between two batches; recipients already expanded keep their notifications. Cancelling a finished broadcast changes nothing.",
    tag: "Broadcasts",
    scope: "admin",
    responses: { 200: { description: "Its progress", schema: BroadcastView } },
    problems: ["not_found"],
  },
];
