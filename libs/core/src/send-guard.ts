import type { Channel } from "./channels.js";
import type { DeadLetterClass } from "./dead-letter.js";

/**
 * The send guard of one (notification, channel) in the `notify_send_guard` bucket (invariant
 * 2). Only a worker holding the claim calls the provider; the state says what may happen next:
 *
 * - sending: a worker holds the claim and may be talking to the provider; a claim older than the
 *   provider deadline belongs to a worker that died mid-send, so its outcome is unknown
 * - sent: the provider accepted (final; the status is reconciled from here if its write was lost)
 * - failed: the provider refused definitively; the next attempt may claim it again
 * - dead: dead-lettered; only a replay releases it
 * - unknown: the provider may have accepted (no answer, or a worker died mid-send); never resent
 *   unless an operator replays it knowingly
 * - expired: its deliver-by deadline passed before a send was made; never sent
 * - suppressed: its address is on the suppression list for the notification's client; never sent
 * - canceled: its client canceled it before a send was made (the processor's cancel takes it by a
 *   compare-and-set, where there was no guard or a failed one); never sent: a worker that finds
 *   it acknowledges its work item with nothing sent
 */
export const GUARD_STATES = [
  "sending",
  "sent",
  "failed",
  "dead",
  "unknown",
  "expired",
  "suppressed",
  "canceled",
] as const;
export type GuardState = (typeof GUARD_STATES)[number];

export interface GuardValue {
  state: GuardState;
  /** Epoch ms of the write. */
  at: number;
  /** The channel attempt this state belongs to. */
  attempt: number;
  /** host:pid of the worker that wrote it. */
  worker?: string;
  /** The provider the claim's send went to (email may fail over from one to the next). */
  provider?: string;
  provider_id?: string;
  /** Why it failed or is unknown; for dead: the dead letter's class and reason. */
  class?: DeadLetterClass;
  reason?: string;
  /**
   * Addresses settled by earlier attempts (hashes; a push notification goes to each of a user's
   * subscriptions): the accepted ones with their provider id, and the ones never to try again.
   */
  accepted?: Array<{ key: string; provider_id: string }>;
  settled?: string[];
}

/** KV keys allow `A-Z a-z 0-9 - _ = / .`; notification ids are UUIDs and channels are fixed words. */
export const guardKey = (notificationId: string, channel: Channel): string => `${notificationId}.${channel}`;
