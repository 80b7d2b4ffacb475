import type { ChannelStatus } from "./channel-status.js";

/**
 * A notification's top-level status: a closed set derived from its channels' statuses
 * (`channel-status.ts`), never stored, so it cannot disagree with them.
 */
export const NOTIFICATION_STATUSES = [
  "accepted",
  "processing",
  "unsettled",
  "completed",
  "partially_failed",
  "failed",
  "suppressed",
  "canceled",
] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

/** One line per status, each complete on its own (exactly one holds), for the API document and docs/architecture.md. */
export const NOTIFICATION_STATUS_DESCRIPTIONS: Record<NotificationStatus, string> = {
  accepted: "stored and queued, not routed yet: no channel has a status",
  processing:
    "at least one channel is waiting (pending, deferred, retrying or parked), or a step of the channel fallback chain may still add a channel",
  unsettled:
    "no channel waiting, at least one unsettled: the provider may have accepted; a receipt may still settle it, and it is never resent on its own",
  completed: "every channel delivered, suppressed or canceled, at least one delivered",
  partially_failed:
    "no channel waiting or unsettled; at least one delivered and at least one failed, bounced or expired",
  failed: "no channel waiting, unsettled or delivered; at least one failed, bounced or expired",
  suppressed: "every channel suppressed (preferences, daily cap, no address): nothing was sent",
  canceled:
    "every channel canceled or suppressed, at least one canceled (POST /notifications/{id}/cancel): nothing was sent",
};

const WAITING: ReadonlySet<ChannelStatus> = new Set(["pending", "deferred", "retrying", "parked"]);

/**
 * The notification's status from its channels' statuses (one per channel; order and repeats do
 * not matter). The first row that matches decides:
 *
 * | channels (after the rows above did not match)      | status             |
 * | -------------------------------------------------- | ------------------ |
 * | none at all                                        | `accepted`         |
 * | any pending, deferred, retrying or parked          | `processing`       |
 * | a fallback step may still add a channel (option)   | `processing`       |
 * | any unsettled                                      | `unsettled`        |
 * | a delivered one and a failed, bounced or expired one | `partially_failed` |
 * | a delivered one                                    | `completed`        |
 * | a failed, bounced or expired one                   | `failed`           |
 * | a canceled one (only canceled and suppressed left) | `canceled`         |
 * | (only suppressed ones are left)                    | `suppressed`       |
 *
 * Why this order: an outcome (completed, partially_failed, failed, suppressed) is claimed only
 * once every channel's outcome is known. A channel still waiting will be sent, so the whole is
 * `processing`; an unsettled channel may turn out delivered or bounced when a receipt comes, so
 * unsettled + failed is `unsettled`, not `failed` (it may become partially_failed), and
 * unsettled + delivered is `unsettled`, not `completed` (it may become partially_failed). It
 * also keeps the one status that needs an operator (`notify dlq`) from hiding behind another.
 * Suppressed channels never change the outcome of the others: delivered + suppressed is
 * `completed`, failed + suppressed is `failed`. Nor do canceled ones: a cancel stops only what
 * was not sent yet, so what was sent before it keeps its outcome (delivered + canceled is
 * `completed`); a notification of which nothing was sent because its client canceled it is
 * `canceled`, even where preferences suppressed some of its channels.
 *
 * Only a bounce still moves a settled status, as it moves a delivered channel (receipts arrive
 * after the send): `completed` may become `partially_failed` or `failed`.
 */
export function notificationStatus(
  channels: Iterable<ChannelStatus>,
  options: { fallbackPending?: boolean } = {},
): NotificationStatus {
  let any = false;
  let unsettled = false;
  let delivered = false;
  let failed = false;
  let canceled = false;
  for (const status of channels) {
    any = true;
    if (WAITING.has(status)) return "processing";
    if (status === "unsettled") unsettled = true;
    else if (status === "delivered") delivered = true;
    // An expired channel was never sent: for the caller that is a failure like any other.
    else if (status === "failed" || status === "bounced" || status === "expired") failed = true;
    else if (status === "canceled") canceled = true;
  }
  if (!any) return "accepted";
  // The outcome is not known while a fallback may still send another channel.
  if (options.fallbackPending) return "processing";
  if (unsettled) return "unsettled";
  if (delivered) return failed ? "partially_failed" : "completed";
  if (failed) return "failed";
  return canceled ? "canceled" : "suppressed";
}
