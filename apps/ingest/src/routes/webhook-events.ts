import { WEBHOOK_EVENT_DESCRIPTIONS, WEBHOOK_EVENT_TYPES } from "@notify/core";

type Json = Record<string, unknown>;

const text = { type: "string" };
const nullableText = { type: ["string", "null"] };
const time = { type: "string", format: "date-time" };

const NOTIFICATION: Json = {
  notification_id: text,
  client_id: text,
  user_id: text,
  category: text,
  notification_data: {
    type: "object",
    description: "The notification's template data: only for an endpoint whose `include` has notification_data",
  },
  recipient: {
    type: "object",
    properties: { email: nullableText, phone: nullableText },
    description:
      "The user's address on the event's channel (email and phone for a notification's own events), as stored when the post is made: only for an endpoint whose `include` has recipient",
  },
};
const CHANNEL: Json = {
  ...NOTIFICATION,
  channel: { type: "string", enum: ["push", "email", "sms", "in_app"] },
  status: text,
  reason: nullableText,
  provider: nullableText,
  provider_id: nullableText,
  attempt: { type: "integer" },
};

/**
 * The `data` of each event type: ids, statuses and reasons; a message's data or an address only
 * for an endpoint that asks for them (`include`).
 */
const DATA: Record<string, Json> = {
  "notification.accepted": {
    ...NOTIFICATION,
    template_id: text,
    priority: { type: "string", enum: ["transactional", "promotional"] },
    channels: { type: ["array", "null"], items: text },
    deliver_by: { type: ["string", "null"], format: "date-time" },
  },
  "notification.completed": {
    ...NOTIFICATION,
    status: { type: "string", enum: ["completed", "partially_failed", "failed", "suppressed", "canceled"] },
    channels: {
      type: "object",
      additionalProperties: { type: "object", properties: { status: text, reason: nullableText } },
    },
  },
  "channel.delivered": CHANNEL,
  "channel.bounced": CHANNEL,
  "channel.failed": CHANNEL,
  "channel.expired": CHANNEL,
  "channel.suppressed": CHANNEL,
  "channel.unsettled": CHANNEL,
  "channel.canceled": CHANNEL,
  "provider.switched": { ...CHANNEL, previous_provider: text },
  "fallback.taken": { ...NOTIFICATION, from: text, to: text, because: text, step: { type: "integer" } },
  "inbox.read": { ...NOTIFICATION, channel: { const: "in_app" }, read_at: time },
  "broadcast.expanded": {
    broadcast_id: text,
    client_id: text,
    category: text,
    template_id: text,
    total: { type: "integer" },
    expanded: { type: "integer" },
  },
  "broadcast.completed": {
    broadcast_id: text,
    client_id: text,
    category: text,
    status: { type: "string", enum: ["expanded", "cancelled"] },
    recipients: { type: "integer" },
    outcomes: {
      type: "object",
      properties: {
        completed: { type: "integer" },
        partially_failed: { type: "integer" },
        failed: { type: "integer" },
        suppressed: { type: "integer" },
        canceled: { type: "integer" },
      },
    },
  },
  ping: { endpoint_id: text, client_id: text },
};

const HEADERS = [
  ["webhook-id", "The event's id (evt_…): the same on every attempt and replay; drop one seen before."],
  ["webhook-timestamp", "Seconds since the epoch when this attempt was signed; refuse one far from now."],
  [
    "webhook-signature",
    "Space-separated v1,<base64 HMAC-SHA256> of `{webhook-id}.{webhook-timestamp}.{body}` under the endpoint's secret (two during a rotation's grace); verify with a Standard Webhooks library.",
  ],
] as const;

/**
 * The `webhooks` section of the OpenAPI document: one operation per event type, the post the
 * service makes to a client's endpoint (Standard Webhooks: headers, signing, retries).
 */
export function webhookOperations(): Json {
  const operations: Json = {};
  for (const type of [...WEBHOOK_EVENT_TYPES, "ping"] as const) {
    operations[type] = {
      post: {
        summary: type,
        description: `${WEBHOOK_EVENT_DESCRIPTIONS[type]}. Answer 2xx within 10 s; anything else is retried for about three days (docs/webhooks.md).`,
        tags: ["Webhook events"],
        parameters: HEADERS.map(([name, description]) => ({
          name,
          in: "header",
          required: true,
          description,
          schema: { type: "string" },
        })),
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["id", "type", "timestamp", "sequence", "data"],
                properties: {
                  id: { type: "string", description: "evt_ and the event's sequence; equals webhook-id" },
                  type: { const: type },
                  timestamp: { ...time, description: "When it happened" },
                  sequence: {
                    type: "integer",
                    description: "Grows with every event: order one notification's events by it",
                  },
                  data: { type: "object", properties: DATA[type] },
                },
              },
            },
          },
        },
        responses: { "2XX": { description: "Received; anything else is retried" } },
      },
    };
  }
  return operations;
}
