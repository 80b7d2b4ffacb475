import * as v from "valibot";
import type { ChannelStatus } from "./channel-status.js";
import type { Channel } from "./channels.js";
import { RequestedBy } from "./dead-letter-replay.js";
import type { GuardValue } from "./send-guard.js";

/**
 * Canceling a notification (POST /api/v1/notifications/{id}/cancel): every channel not sent yet
 * is canceled, what was sent (or is being sent) stays as it is. The processor runs it, as it
 * alone holds the send guard; this is what both sides agree on, and the policy, pure.
 */

/** The reason a canceled channel carries. */
export const CANCEL_REASON = "canceled_by_client";

/**
 * What ingest sends the processor on notify.ops.cancel: the notification and `requested_by`,
 * the key that asked, whose client must own the notification. The processor validates it again.
 */
export const CancelMessage = v.strictObject({
  notification_id: v.pipe(v.string("notification_id must be a string"), v.minLength(1), v.maxLength(256)),
  requested_by: RequestedBy,
});
export type CancelMessage = v.InferOutput<typeof CancelMessage>;

/**
 * What became of one channel:
 * - canceled: this request canceled it
 * - already_canceled: an earlier request did
 * - not_canceled: it was sent, is being sent, or ended otherwise (`why`)
 */
export const CANCEL_RESULTS = ["canceled", "already_canceled", "not_canceled"] as const;
export type CancelResult = (typeof CANCEL_RESULTS)[number];

export interface ChannelCancel {
  result: CancelResult;
  /** Why it was not canceled; null otherwise. */
  why: string | null;
}

/**
 * The processor's answer on notify.ops.cancel: no notification of that client (`not_found`), no
 * channel routed yet (`not_routed`: its lane message is still on its way, try again shortly), or
 * what became of each channel.
 */
export type CancelAnswer =
  | { outcome: "not_found" }
  | { outcome: "not_routed" }
  | {
      outcome: "done";
      channels: Partial<Record<Channel, ChannelCancel>>;
      /**
       * A digest's item, which has no channels of its own: canceled (left out of its digest),
       * already_canceled, or too_late (its digest was sent).
       */
      digest?: "canceled" | "already_canceled" | "too_late";
    };

/** A cancel's first look at a channel: its status. */
export type CancelByStatus = { action: "already_canceled" } | { action: "keep"; why: string } | { action: "guard" };

/**
 * What a channel's status says of a cancel: a waiting channel (pending, deferred, retrying,
 * parked) may still be canceled, which its send guard decides (`cancelByGuard`): its work item
 * may be queued or held by a worker. Any other status is an outcome the cancel leaves alone: an
 * unsettled channel may have been accepted by its provider.
 */
export function cancelByStatus(status: ChannelStatus): CancelByStatus {
  switch (status) {
    case "pending":
    case "deferred":
    case "retrying":
    case "parked":
      return { action: "guard" };
    case "canceled":
      return { action: "already_canceled" };
    case "unsettled":
      return { action: "keep", why: "unsettled: the provider may have accepted it" };
    default:
      return { action: "keep", why: `already ${status}` };
  }
}

/**
 * A cancel's look at a waiting channel's send guard:
 * - take: no guard (never claimed: queued, or deferred) or `failed` (a retry is due): the cancel
 *   writes `canceled` by a compare-and-set on what it read, so a worker claiming it at the same
 *   time either wins (and sends) or finds it canceled
 * - already_canceled: an earlier cancel took it (its status write may have been lost)
 * - keep: a worker holds it or held it: being sent, sent, possibly sent, or ended otherwise; a
 *   failed attempt that some of a user's push subscriptions accepted was sent in part
 */
export type CancelByGuard = { action: "take" } | { action: "already_canceled" } | { action: "keep"; why: string };

export function cancelByGuard(guard: GuardValue | null): CancelByGuard {
  if (guard === null) return { action: "take" };
  switch (guard.state) {
    case "failed": {
      const accepted = guard.accepted?.length ?? 0;
      if (accepted > 0) return { action: "keep", why: `sent in part: ${accepted} address(es) accepted it` };
      return { action: "take" };
    }
    case "canceled":
      return { action: "already_canceled" };
    case "sending":
      return { action: "keep", why: "being sent (send guard: sending)" };
    case "sent":
      return { action: "keep", why: "sent (send guard: sent)" };
    case "unknown":
      return { action: "keep", why: "the provider may have accepted it (send guard: unknown)" };
    case "dead":
      return { action: "keep", why: "dead-lettered (send guard: dead)" };
    case "expired":
      return { action: "keep", why: "its deliver-by deadline passed (send guard: expired)" };
    case "suppressed":
      return { action: "keep", why: "its address is on the suppression list (send guard: suppressed)" };
  }
}
