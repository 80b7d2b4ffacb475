import * as v from "valibot";
import type { Channel } from "./channels.js";
import type { DeadLetter, DeadLetterClass } from "./dead-letter.js";
import { deadLetterFilters } from "./dead-letter-replay.js";

/** The largest page of dead letters the processor reads for one request (the API's page size cap). */
export const DEAD_LETTER_PAGE_SIZE_MAX = 200;

const positive = (field: string) =>
  v.pipe(
    v.number(`${field} must be a positive integer`),
    v.safeInteger(`${field} must be a positive integer`),
    v.minValue(1, `${field} must be a positive integer`),
  );

/**
 * What ingest sends the processor on notify.ops.dlq.list: a page of the dead letters the
 * filters select, newest first (GET /api/v1/dead-letters, its query parsed). The processor
 * validates it again: it reads the stream for whoever asks.
 */
export const DeadLetterListRequest = v.strictObject({
  page: v.optional(positive("page"), 1),
  page_size: v.optional(
    v.pipe(
      positive("page_size"),
      v.maxValue(DEAD_LETTER_PAGE_SIZE_MAX, `page_size must be at most ${DEAD_LETTER_PAGE_SIZE_MAX}`),
    ),
    50,
  ),
  ...deadLetterFilters,
});
export type DeadLetterListRequest = v.InferOutput<typeof DeadLetterListRequest>;

/** One letter of a page: what GET /api/v1/dead-letters lists of it. */
export interface DeadLetterSummary {
  seq: number;
  dead_lettered_at: string;
  channel: Channel;
  lane: string;
  class: DeadLetterClass;
  reason: string;
  provider: string;
  attempts: number;
  notification_id: string;
  client_id: string | null;
  user_id: string;
}

/** The processor's answer on notify.ops.dlq.list: the page, and how many letters the filters select. */
export interface DeadLetterPage {
  data: DeadLetterSummary[];
  page: number;
  page_size: number;
  total_count: number;
}

/** What ingest sends the processor on notify.ops.dlq.show: one letter by its stream sequence. */
export const DeadLetterShowRequest = v.strictObject({ seq: positive("seq") });
export type DeadLetterShowRequest = v.InferOutput<typeof DeadLetterShowRequest>;

/**
 * The processor's answer on notify.ops.dlq.show (GET /api/v1/dead-letters/{seq}): the letter as
 * stored, its channel's state now (null once the notification is gone) and its status history.
 * A sequence holding no letter is answered `not_found`.
 */
export interface DeadLetterShown {
  seq: number;
  dead_lettered_at: string;
  letter: DeadLetter;
  status_now: {
    notification_id: string;
    channel: Channel;
    status: string;
    reason: string | null;
    attempts: number;
  } | null;
  status_history: Array<{ status: string; reason: string | null; attempt: number; at: string }>;
}
