import type { Bus } from "@notify/bus";
import { AppError, type CancelAnswer, type CancelMessage, type ChannelCancel, isUuid } from "@notify/core";
import type { Database } from "@notify/db";
import { askProcessor } from "../dead-letters/ask.js";
import { getNotification, type NotificationDetailView } from "./get.js";

/**
 * How long a cancel waits for the processor: a cancel holds its notification's rows for a few
 * statements and one send-guard write per channel, and may wait for a deferral release of it in
 * progress; a processor that has not answered by then is out of reach (503, Retry-After). A
 * cancel it finishes after all is found done by the client's next one.
 */
export const CANCEL_TIMEOUT_MS = 10_000;

/** How soon to try again a cancel of a notification not routed yet (its lane message is on its way). */
export const NOT_ROUTED_RETRY_SECONDS = 1;

/** POST /api/v1/notifications/{id}/cancel: the notification as GET shows it after the cancel, and what became of each channel. */
export interface CancelView extends NotificationDetailView {
  cancel: Partial<Record<string, ChannelCancel>>;
  /** A digest's item: what the cancel did to it. */
  cancel_digest?: "canceled" | "already_canceled" | "too_late";
}

/**
 * Ingest does not cancel itself (it holds no send guard): it asks a processor on
 * notify.ops.cancel with the key that asked, whose client must own the notification, then reads
 * the notification back as GET /notifications/{id} shows it. Another client's notification, like
 * one that does not exist, is a 404; one with no channel routed yet is a 409 with Retry-After.
 */
export async function cancelOwnNotification(
  deps: { bus: Bus; database: Database; cancelTimeoutMs?: number },
  by: { keyId: string; clientId: string },
  id: string,
): Promise<CancelView> {
  // Notification ids are UUIDs: anything else names none, and is not worth the processor's time.
  if (!isUuid(id)) throw new AppError("not_found", `notification ${id} does not exist`);
  const message: CancelMessage = { notification_id: id, requested_by: { key_id: by.keyId, client_id: by.clientId } };
  const answer = await askProcessor<CancelAnswer>(
    deps.bus,
    deps.bus.subjects.opsCancel,
    message,
    deps.cancelTimeoutMs ?? CANCEL_TIMEOUT_MS,
  );
  if (answer.outcome === "not_found") throw new AppError("not_found", `notification ${id} does not exist`);
  if (answer.outcome === "not_routed") {
    throw new AppError(
      "notification_not_routed",
      `notification ${id} is not routed yet: no channel has a status to cancel; retry in a moment`,
      { context: { retryAfterSeconds: NOT_ROUTED_RETRY_SECONDS } },
    );
  }
  return {
    ...(await getNotification(deps.database, by.clientId, id)),
    cancel: answer.channels,
    ...(answer.digest === undefined ? {} : { cancel_digest: answer.digest }),
  };
}
