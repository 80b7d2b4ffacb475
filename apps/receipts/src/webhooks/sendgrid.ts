import type { KeyObject } from "node:crypto";
import { AppError, type ChannelStatus } from "@notify/core";
import {
  type Database,
  type NewSuppression,
  type Receipt,
  type RecordOutcome,
  recordReceipts,
  type Sql,
} from "@notify/db";
import { type AppEnv, noteAccess, type UnverifiedReads } from "@notify/http";
import { SENDGRID_SIGNATURE_HEADER, SENDGRID_TIMESTAMP_HEADER, verifySendgridSignature } from "@notify/providers";
import type { Hono } from "hono";
import { receiptTracing } from "../receipts/trace.js";
import type { ReceiptMetrics } from "./metrics.js";
import {
  type AcceptedEvent,
  MalformedBatch,
  type ParsedBatch,
  parseSendgridBatch,
  type RejectedEvent,
} from "./sendgrid-batch.js";
import { addReported, sendgridSuppression } from "./suppressions.js";

export interface SendgridWebhookDeps {
  sql: Sql;
  /** Where reported addresses go on the suppression list. */
  database: Database;
  publicKey: KeyObject;
  window: TimestampWindow;
  metrics: ReceiptMetrics;
  /** Bounds and charges the reads of bodies whose signature is not yet checked. */
  unverified: UnverifiedReads;
  /** Largest post (413 beyond): SendGrid posts a batch once it reaches 768 KB, if not sooner. */
  maxBodyBytes: number;
}

type SendgridEvent = Record<string, unknown>;

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

/**
 * What an event means for the channel. `bounce` with type `blocked` is a soft bounce (the
 * receiving server refused for now; SendGrid does not retry it), any other bounce is hard;
 * `dropped` never left SendGrid (a suppressed or invalid address). Opens, clicks, deferrals,
 * spam reports and unsubscribes settle nothing about this message's delivery (they are stored
 * for the record, and feed the suppression list: suppressions.ts).
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

export interface TimestampWindow {
  /** Oldest accepted signed timestamp, in seconds before now. */
  maxAgeSeconds: number;
  /** Furthest accepted signed timestamp ahead of now (clock skew), in seconds. */
  maxFutureSeconds: number;
}

/** Postgres errors caused by a value, not by the database: SQLSTATE classes 22 (data) and 54 (limits). */
const isDataError = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("22") || code.startsWith("54"));
};

/** An event that names its send, as a receipt. */
type ReceiptEvent = AcceptedEvent & { messageId: string };

const toReceipt = (event: ReceiptEvent): Receipt => ({
  provider: "sendgrid",
  eventId: event.eventId,
  // sg_message_id is the X-Message-Id the send answered with, plus a relay suffix.
  providerId: event.messageId.split(".")[0] || event.messageId,
  ...channelStatus(event.payload),
  payload: event.payload,
});

/**
 * SendGrid's Event Webhook: signed JSON batches, retried for 24 h until answered 2xx. A post
 * whose signature is missing or wrong, whose signed timestamp is outside the window (a replay:
 * SendGrid signs each try anew) or whose body is not a JSON array is refused whole (401, 400).
 * Otherwise the answer is 200 with every event accounted for: stored, or rejected with its
 * index and reason (refusing the post would make SendGrid retry, and finally drop, the good
 * events with it). Never a 5xx for what a body holds; only an unavailable database is one.
 */
export function mountSendgridWebhook(app: Hono<AppEnv>, deps: SendgridWebhookDeps): void {
  const refuse = (reason: string, error: AppError): never => {
    deps.metrics.rejected.inc({ provider: "sendgrid", reason });
    throw error;
  };
  app.post("/webhooks/sendgrid", deps.unverified.guard(deps.maxBodyBytes), async (c) => {
    const signature = c.req.header(SENDGRID_SIGNATURE_HEADER);
    const timestamp = c.req.header(SENDGRID_TIMESTAMP_HEADER);
    if (signature === undefined || timestamp === undefined) {
      return refuse(
        "signature",
        new AppError("unauthenticated", "X-Twilio-Email-Event-Webhook-Signature and -Timestamp are required"),
      );
    }
    // The signature covers the bytes as sent: verify before parsing, never a re-serialisation.
    const body = new Uint8Array(await c.req.arrayBuffer());
    if (!verifySendgridSignature(deps.publicKey, signature, timestamp, body)) {
      return refuse("signature", new AppError("unauthenticated", "the SendGrid signature does not match"));
    }
    const signedAt = /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : Number.NaN;
    const now = Math.floor(Date.now() / 1000);
    if (!(signedAt >= now - deps.window.maxAgeSeconds && signedAt <= now + deps.window.maxFutureSeconds)) {
      return refuse(
        "timestamp",
        new AppError(
          "unauthenticated",
          `the signed timestamp must be within ${deps.window.maxAgeSeconds} s before and ${deps.window.maxFutureSeconds} s after now`,
        ),
      );
    }
    // Signed by SendGrid's key, and fresh: the read no longer counts as unauthenticated.
    deps.unverified.verified(c);
    let batch: ParsedBatch;
    try {
      batch = parseSendgridBatch(body);
    } catch (error) {
      if (!(error instanceof MalformedBatch)) throw error;
      return refuse("malformed", new AppError(error.code, error.message));
    }

    const rejected: RejectedEvent[] = [...batch.rejected];
    let outcome: RecordOutcome = { stored: 0, duplicates: 0, pending: 0 };
    const receipts = batch.accepted.filter((event): event is ReceiptEvent => event.messageId !== undefined);
    try {
      outcome = await recordReceipts(deps.sql, receipts.map(toReceipt), receiptTracing(c.get("log")));
    } catch (error) {
      if (!isDataError(error)) throw error;
      // Something in the batch Postgres would not take (every known case is caught above):
      // one event at a time, so only that one is rejected.
      for (const event of receipts) {
        try {
          const one = await recordReceipts(deps.sql, [toReceipt(event)], receiptTracing(c.get("log")));
          outcome = {
            stored: outcome.stored + one.stored,
            duplicates: outcome.duplicates + one.duplicates,
            pending: outcome.pending + one.pending,
          };
        } catch (error) {
          if (!isDataError(error)) throw error;
          rejected.push({ index: event.index, reason: "unstorable", detail: "Postgres refused the event" });
        }
      }
      rejected.sort((a, b) => a.index - b.index);
    }
    // After the receipts: a post that fails here is retried by SendGrid, its receipts are then
    // duplicates and its entries are added (an entry already there stays as it is).
    const refused = new Set(rejected.map((r) => r.index));
    const entries = batch.accepted.flatMap((event): NewSuppression[] => {
      const entry = refused.has(event.index) ? null : sendgridSuppression(event.payload, event.eventId);
      return entry === null ? [] : [entry];
    });
    const suppressed = await addReported(deps.database, entries, deps.metrics, "sendgrid");
    for (const r of rejected) deps.metrics.rejected.inc({ provider: "sendgrid", reason: r.reason });
    for (const r of batch.repaired) deps.metrics.repaired.inc({ provider: "sendgrid", reason: r.reason });
    const log = c.get("log");
    if (rejected.length > 0 || batch.repaired.length > 0) {
      log.warn(
        { provider: "sendgrid", rejected: rejected.slice(0, 50), repaired: batch.repaired.slice(0, 50) },
        "receipts: events rejected or repaired",
      );
    }
    noteAccess(c, {
      provider: "sendgrid",
      events: batch.size,
      rejected: rejected.length,
      repaired: batch.repaired.length,
      ...outcome,
      suppressed,
    });
    return c.json(
      {
        events: batch.size,
        accepted: batch.size - rejected.length,
        ...outcome,
        suppressed,
        rejected,
        repaired: batch.repaired,
      },
      200,
    );
  });
}
