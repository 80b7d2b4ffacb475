import { AppError, type ChannelStatus } from "@notify/core";
import { type Database, recordReceipts, type Sql } from "@notify/db";
import { type AppEnv, noteAccess, type UnverifiedReads } from "@notify/http";
import { formParams, verifyPlivoSignature } from "@notify/providers";
import type { Context, Hono } from "hono";
import { receiptTracing } from "../receipts/trace.js";
import type { ReceiptMetrics } from "./metrics.js";
import { publicUrl } from "./signed-url.js";
import { addReported, plivoReportSuppression } from "./suppressions.js";
import { makeStorable, storable } from "./text.js";

export interface PlivoWebhookDeps {
  sql: Sql;
  /** Where numbers a report says cannot receive go on the suppression list. */
  database: Database;
  /** The auth token Plivo signs reports with. */
  authToken: string;
  publicBaseUrl?: string;
  metrics: ReceiptMetrics;
  /** Bounds and charges the reads of bodies whose signature is not yet checked. */
  unverified: UnverifiedReads;
  /** Largest report (413 beyond): one message status, about two dozen short form fields. */
  maxBodyBytes: number;
}

/** Plivo's message states: only the final ones settle a channel. */
function channelStatus(
  status: string,
  errorCode: string | undefined,
): { status: ChannelStatus | null; reason: string | null } {
  switch (status) {
    case "delivered":
      return { status: "delivered", reason: null };
    case "undelivered":
    case "failed":
    case "rejected":
      return { status: "bounced", reason: `plivo ${status}${errorCode ? ` (error ${errorCode})` : ""}` };
    default:
      return { status: null, reason: null };
  }
}

/**
 * Plivo delivery reports: signed form posts, one per message state. Only the V3 signature is
 * accepted (it covers the URL with its query, every POST parameter and the nonce); V2 signs the
 * URL without query and parameters, so a captured V2 report could be replayed with any status,
 * and a report carrying only V2 is refused (401) like an unsigned one. Plivo sends both.
 *
 * Replay: V3 has a nonce but no timestamp, and the report URL carries no expiry, so a captured
 * report can be posted again as is. It is then a duplicate: the event id is MessageUUID:Status
 * (provider_receipts' key, within the unmatched retention), and a channel only moves forward.
 */
export function mountPlivoWebhook(app: Hono<AppEnv>, deps: PlivoWebhookDeps): void {
  app.post("/webhooks/plivo", deps.unverified.guard(deps.maxBodyBytes), async (c) => {
    const params = await verifiedPlivoForm(c, deps);

    const one = (name: string) => params[name]?.[0];
    const messageUuid = one("MessageUUID");
    const state = one("Status");
    // Postgres cannot store U+0000 (form decoding yields no unpaired surrogates), and the ids
    // are key entries: such a report is refused, never a failed insert.
    const usable = (value: string | undefined) => value !== undefined && value.length <= 256 && storable(value);
    if (!messageUuid || !state || !usable(messageUuid) || !usable(state)) {
      deps.metrics.rejected.inc({ provider: "plivo", reason: "invalid_event" });
      const problem = (value: string | undefined) =>
        value ? "must be at most 256 characters, without U+0000" : "is required";
      throw new AppError("validation_failed", "a delivery report needs MessageUUID and Status", {
        fields: [
          ...(usable(messageUuid) ? [] : [{ field: "MessageUUID", message: problem(messageUuid) }]),
          ...(usable(state) ? [] : [{ field: "Status", message: problem(state) }]),
        ],
      });
    }
    // The report URL names the notification (the provider sets it per message); the V3
    // signature covers the query, so it may bind a channel that has no provider id yet.
    const url = new URL(c.req.url);
    const errorCode = one("ErrorCode");
    const notificationId = url.searchParams.get("notification_id");
    const eventId = `${messageUuid}:${state}`;
    const outcome = await recordReceipts(
      deps.sql,
      [
        {
          provider: "plivo",
          // Plivo reports each state of a message once and retries a post that failed: the pair
          // is the event's identity.
          eventId,
          providerId: messageUuid,
          ...channelStatus(state, errorCode === undefined ? undefined : makeStorable(errorCode)),
          // The report's own fields stay nested: its parameters must never read as the binding keys.
          payload: {
            report: Object.fromEntries(
              Object.entries(params).map(([k, values]) => [makeStorable(k), makeStorable(values.join(","))]),
            ),
            ...(notificationId ? { notification_id: makeStorable(notificationId), channel: "sms" } : {}),
          },
        },
      ],
      receiptTracing(c.get("log")),
    );
    // After the receipt, as for SendGrid: a retried report adds what a failed one did not.
    const entry = plivoReportSuppression({
      status: state,
      errorCode: errorCode === undefined ? undefined : makeStorable(errorCode),
      to: one("To"),
      eventId,
      notificationId: notificationId === null ? null : makeStorable(notificationId),
    });
    const suppressed = await addReported(deps.database, entry === null ? [] : [entry], deps.metrics, "plivo");
    noteAccess(c, { provider: "plivo", provider_id: messageUuid, state, ...outcome, suppressed });
    return c.body(null, 200);
  });
}

/**
 * The form parameters of a Plivo callback (a delivery report, an inbound message) whose V3
 * signature verifies; otherwise a 401 problem. Only V3 is accepted (it covers the URL with its
 * query, every POST parameter and the nonce); V2 signs the URL alone, so a captured V2 callback
 * could be replayed with any parameters. Plivo sends both.
 */
export async function verifiedPlivoForm(
  c: Context<AppEnv>,
  deps: Pick<PlivoWebhookDeps, "authToken" | "publicBaseUrl" | "metrics" | "unverified">,
): Promise<Record<string, string[]>> {
  const refuse = (reason: string, message: string): never => {
    deps.metrics.rejected.inc({ provider: "plivo", reason });
    throw new AppError("unauthenticated", message);
  };
  // Without V3's headers a callback is refused whatever it holds (V2 signs no parameter): its
  // verdict needs no body, and the body is not read.
  const v3 =
    c.req.header("x-plivo-signature-v3") !== undefined && c.req.header("x-plivo-signature-v3-nonce") !== undefined;
  const params = formParams(new URLSearchParams(v3 ? await c.req.text() : ""));
  const verdict = verifyPlivoSignature(deps.authToken, {
    method: "POST",
    url: publicUrl(c.req.url, deps.publicBaseUrl),
    params,
    headers: (name) => c.req.header(name),
  });
  if (verdict === "missing") refuse("signature", "X-Plivo-Signature-V3 and X-Plivo-Signature-V3-Nonce are required");
  if (verdict === "v2") {
    refuse("v2_only", "X-Plivo-Signature-V3 is required: a V2 signature does not cover the callback's parameters");
  }
  if (verdict === "invalid") refuse("signature", "the Plivo signature does not match");
  deps.unverified.verified(c);
  return params;
}
