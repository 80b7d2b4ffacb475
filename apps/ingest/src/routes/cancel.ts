import { CANCEL_RESULTS, CHANNELS } from "@notify/core";
import type { Hono } from "hono";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { cancelOwnNotification } from "../notifications/cancel.js";
import { contract } from "./contract.js";
import { NotificationDetail } from "./notifications.js";

const ChannelCancel = v.object({
  result: v.pipe(
    v.picklist(CANCEL_RESULTS),
    v.metadata({
      description:
        "canceled: this request canceled it; already_canceled: an earlier one did; not_canceled: it was sent, is being sent, or ended otherwise (why)",
    }),
  ),
  why: v.pipe(
    v.nullable(v.string()),
    v.metadata({ description: "Why it was not canceled (e.g. already delivered, being sent); null otherwise" }),
  ),
});

const CancelView = v.object({
  ...NotificationDetail.entries,
  cancel: v.pipe(
    v.record(v.picklist(CHANNELS), ChannelCancel),
    v.metadata({ description: "What this request did to each channel the notification has" }),
  ),
  cancel_digest: v.pipe(
    v.optional(v.picklist(["canceled", "already_canceled", "too_late"])),
    v.metadata({
      description:
        "For a digest's item (no channels of its own): canceled (left out of its digest), already_canceled, or too_late (its digest was sent)",
    }),
  ),
});

/** POST /notifications/{id}/cancel: the processor cancels (ingest asks it on NATS) and the notification is read back. */
export function mountCancel(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "bus" | "database" | "cancelTimeoutMs">): void {
  v1.post(
    "/notifications/:id/cancel",
    contract({
      summary: "Cancel a notification",
      description:
        "Cancels every channel of the notification not sent yet: pending, deferred (quiet hours, a scheduled send), retrying or parked, unless a worker is sending it at this moment. Each becomes `canceled` and is never sent; a fallback step not taken yet never will be. What was sent, is being sent, may have been accepted (unsettled) or ended otherwise stays as it is, and `cancel` says why. Idempotent: a repeated cancel changes nothing and answers 200 again. Another client's notification is a 404. A digest's item not sent yet is left out of its digest (`cancel_digest`). One not routed yet (its channels have no status: the processor has not read it from its lane yet, usually a matter of milliseconds) is a 409 with Retry-After. The processor runs the cancel (ingest asks it on NATS): none answering within 10 s is a 503 with Retry-After.",
      tag: "Notifications",
      scope: "ingest",
      responses: {
        200: {
          description:
            "The notification after the cancel (as GET /notifications/{id} shows it), and what became of each channel",
          schema: CancelView,
        },
      },
      problems: ["not_found", "notification_not_routed"],
    }),
    async (c) => {
      const { keyId, clientId } = c.get("principal");
      const view = await cancelOwnNotification(deps, { keyId, clientId }, c.req.param("id"));
      const canceled = Object.entries(view.cancel)
        .filter(([, outcome]) => outcome?.result === "canceled")
        .map(([channel]) => channel);
      c.get("log").info({ notification_id: view.notification_id, canceled }, "notification canceled");
      return c.json(view);
    },
  );
}
