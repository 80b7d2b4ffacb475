import type { Channel, Priority } from "./channels.js";
import type { WorkItem } from "./notification.js";

/**
 * Why an item is on the dead-letter stream:
 * - permanent: the provider refused it for good (invalid address or token, hard bounce, payload)
 * - retries_exhausted: transient failures used up MAX_ATTEMPTS
 * - outcome_unknown: the provider may have accepted it (no answer, or a worker died mid-send);
 *   its channel is unsettled, and it is replayed only on an operator's explicit request
 */
export const DEAD_LETTER_CLASSES = ["permanent", "retries_exhausted", "outcome_unknown"] as const;
export type DeadLetterClass = (typeof DEAD_LETTER_CLASSES)[number];

/** The original request as ingest stored it. */
export interface DeadLetterNotification {
  notification_id: string;
  client_id: string;
  user_id: string;
  category: string;
  template_id: string;
  template_version: number | null;
  priority: Priority;
  requested_channels: Channel[] | null;
  data: Record<string, unknown>;
  dedup_key: string;
  created_at: string;
}

export interface DeadLetterAttempt {
  attempt: number;
  outcome: string;
  /** The provider called; absent or null when the attempt's row names none. */
  provider?: string | null;
  provider_id: string | null;
  error: string | null;
  at: string;
}

/**
 * A message on `notify.dlq.<channel>`: everything needed to understand and replay it:
 * the original request, the rendered message, and every attempt with its error and time.
 */
export interface DeadLetter {
  version: 1;
  class: DeadLetterClass;
  reason: string;
  channel: Channel;
  lane: Priority;
  provider: string;
  /** The channel's attempt count when it was dead-lettered. */
  attempts: number;
  notification: DeadLetterNotification | null;
  item: WorkItem;
  history: DeadLetterAttempt[];
  dead_lettered_at: string;
}
