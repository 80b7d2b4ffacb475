import type { KeyObject } from "node:crypto";
import { AppError, type ChannelStatus } from "@notify/core";
import { type Receipt, recordReceipts, type Sql } from "@notify/db";
import { type AppEnv, limitBody } from "@notify/http";
import {
  SENDGRID_SIGNATURE_HEADER,
  SENDGRID_TIMESTAMP_HEADER,
  verifySendgridSignature,
} from "@notify/providers/sendgrid/event-webhook";
import type { Hono } from "hono";

export interface SendgridWebhookDeps {
  sql: Sql;
  publicKey: KeyObject;
}

// SendGrid batches events by count and time; a few MB covers its largest batches.
const MAX_BODY_BYTES = 8 * 1024 * 1024;

type SendgridEvent = Record<string, unknown>;

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

/**
 * What an event means for the channel. `bounce` with type `blocked` is a soft bounce (the
 * receiving server refused for now; SendGrid does not retry it), any other bounce is hard;
 * `dropped` never left SendGrid (a suppressed or invalid address). Opens, clicks, deferrals
 * and unsubscribes settle nothing about this message's delivery.
 */
function channelStatus(event: SendgridEvent): { status: ChannelStatus | null; reason: string | null } {
  const detail = [text(event.status), text(event.reason)].filter(Boolean).join(" ");
  switch (event.event) {
    case "delivered":
      return { status: "delivered", reason: null };
    case "bounce":
      return {
        status: "bounced",
        reason: `${event.type === "blocked" ? "soft bounce" : "hard bounce"}${detail ? `: ${detail}` : ""}`,
      };
    case "dropped":
      return { status: "bounced", reason: `dropped${detail ? `: ${detail}` : ""}` };
    default:
      return { status: null, reason: null };
  }
}

/** SendGrid's Event Webhook: signed JSON batches, retried for 24 h until answered 2xx. */
export function mountSendgridWebhook(app: Hono<AppEnv>, deps: SendgridWebhookDeps): void {
  app.post("/webhooks/sendgrid", limitBody(MAX_BODY_BYTES), async (c) => {
    const signature = c.req.header(SENDGRID_SIGNATURE_HEADER);
    const timestamp = c.req.header(SENDGRID_TIMESTAMP_HEADER);
    if (signature === undefined || timestamp === undefined) {
      throw new AppError("unauthenticated", "X-Twilio-Email-Event-Webhook-Signature and -Timestamp are required");
    }
    // The signature covers the bytes as sent: verify before parsing, never a re-serialisation.
    const body = new Uint8Array(await c.req.arrayBuffer());
    if (!verifySendgridSignature(deps.publicKey, signature, timestamp, body)) {
      throw new AppError("unauthenticated", "the SendGrid signature does not match");
    }
    let events: unknown;
    try {
      events = JSON.parse(Buffer.from(body).toString("utf8"));
    } catch {
      throw new AppError("malformed_json", "the request body is not valid JSON");
    }
    if (!Array.isArray(events)) throw new AppError("validation_failed", "an Event Webhook body is a JSON array");

    const receipts: Receipt[] = [];
    let skipped = 0;
    for (const event of events as unknown[]) {
      const fields = typeof event === "object" && event !== null ? (event as SendgridEvent) : {};
      const eventId = text(fields.sg_event_id);
      const messageId = text(fields.sg_message_id);
      if (eventId === undefined || messageId === undefined || text(fields.event) === undefined) {
        // Refusing the batch would make SendGrid post the same unusable event for 24 h.
        skipped += 1;
        continue;
      }
      receipts.push({
        provider: "sendgrid",
        eventId,
        // sg_message_id is the X-Message-Id the send answered with, plus a relay suffix.
        providerId: messageId.split(".")[0] ?? messageId,
        ...channelStatus(fields),
        payload: fields,
      });
    }
    const outcome = await recordReceipts(deps.sql, receipts);
    c.get("log").info({ provider: "sendgrid", events: events.length, skipped, ...outcome }, "receipts");
    return c.body(null, 200);
  });
}
