import { AppError, type ChannelStatus } from "@notify/core";
import { recordReceipts, type Sql } from "@notify/db";
import { type AppEnv, limitBody } from "@notify/http";
import { formParams, verifyPlivoSignature } from "@notify/providers/plivo/signature";
import type { Hono } from "hono";
import { publicUrl } from "./signed-url.js";

export interface PlivoWebhookDeps {
  sql: Sql;
  /** The auth token Plivo signs reports with. */
  authToken: string;
  publicBaseUrl?: string;
}

// A delivery report is a dozen short form fields.
const MAX_BODY_BYTES = 64 * 1024;

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

/** Plivo delivery reports: signed form posts, one per message state. */
export function mountPlivoWebhook(app: Hono<AppEnv>, deps: PlivoWebhookDeps): void {
  app.post("/webhooks/plivo", limitBody(MAX_BODY_BYTES), async (c) => {
    const params = formParams(new URLSearchParams(await c.req.text()));
    const verdict = verifyPlivoSignature(deps.authToken, {
      method: "POST",
      url: publicUrl(c.req.url, deps.publicBaseUrl),
      params,
      headers: (name) => c.req.header(name),
    });
    if (verdict === "missing") throw new AppError("unauthenticated", "X-Plivo-Signature-V3 or -V2 is required");
    if (verdict === "invalid") throw new AppError("unauthenticated", "the Plivo signature does not match");

    const one = (name: string) => params[name]?.[0];
    const messageUuid = one("MessageUUID");
    const state = one("Status");
    if (!messageUuid || !state) {
      throw new AppError("validation_failed", "a delivery report needs MessageUUID and Status", {
        fields: [
          ...(messageUuid ? [] : [{ field: "MessageUUID", message: "is required" }]),
          ...(state ? [] : [{ field: "Status", message: "is required" }]),
        ],
      });
    }
    // The report URL names the notification (the provider sets it per message); V2 does not
    // sign the query, so only a V3-verified one may bind a channel that has no provider id yet.
    const url = new URL(c.req.url);
    const notificationId = verdict === "v3" ? url.searchParams.get("notification_id") : null;
    const outcome = await recordReceipts(deps.sql, [
      {
        provider: "plivo",
        // Plivo reports each state of a message once and retries a post that failed: the pair
        // is the event's identity.
        eventId: `${messageUuid}:${state}`,
        providerId: messageUuid,
        ...channelStatus(state, one("ErrorCode")),
        // The report's own fields stay nested: unsigned V2 parameters must never read as the binding keys.
        payload: {
          report: Object.fromEntries(Object.entries(params).map(([k, values]) => [k, values.join(",")])),
          ...(notificationId ? { notification_id: notificationId, channel: "sms" } : {}),
        },
      },
    ]);
    c.get("log").info({ provider: "plivo", provider_id: messageUuid, state, ...outcome }, "receipt");
    return c.body(null, 200);
  });
}
