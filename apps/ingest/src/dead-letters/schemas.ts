import { CHANNELS, DEAD_LETTER_CLASSES, deadLetterFilters, REPLAY_BATCH_LIMIT, REPLAY_SCAN_LIMIT } from "@notify/core";
import * as v from "valibot";
import { offsetPageQuery } from "../pagination.js";

/**
 * Query of GET /api/v1/dead-letters (offset pagination; page_size is clamped to MAX_PAGE_SIZE,
 * the processor's DEAD_LETTER_PAGE_SIZE_MAX too) and the filters, as a replay's.
 */
export const ListDeadLettersQuery = v.strictObject({ ...offsetPageQuery, ...deadLetterFilters });
export type ListDeadLettersQuery = v.InferOutput<typeof ListDeadLettersQuery>;

export const DeadLetterSummary = v.object({
  seq: v.number(),
  dead_lettered_at: v.string(),
  channel: v.picklist(CHANNELS),
  lane: v.string(),
  class: v.picklist(DEAD_LETTER_CLASSES),
  reason: v.string(),
  provider: v.string(),
  attempts: v.number(),
  notification_id: v.string(),
  client_id: v.nullable(v.string()),
  user_id: v.string(),
});
export type DeadLetterSummary = v.InferOutput<typeof DeadLetterSummary>;

export const DeadLetterPage = v.object({
  data: v.array(DeadLetterSummary),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});

export const ReplayAnswer = v.object({
  dry_run: v.boolean(),
  selected: v.pipe(
    v.number(),
    v.metadata({ description: "Channels selected (a channel counts once, by its latest letter)" }),
  ),
  replayed: v.number(),
  skipped: v.number(),
  remaining: v.pipe(
    v.number(),
    v.metadata({
      description: `A selection by filters or \`all\` takes at most ${REPLAY_BATCH_LIMIT} letters and looks at at most ${REPLAY_SCAN_LIMIT} a call: how many letters after them were not looked at (at most; the filters beyond channel and since are not applied to them). 0: the selection is complete`,
    }),
  ),
  next_seq: v.pipe(
    v.nullable(v.number()),
    v.metadata({ description: "Pass as from_seq to go on with the rest; null when nothing remains" }),
  ),
  data: v.array(
    v.object({
      seq: v.number(),
      notification_id: v.string(),
      channel: v.picklist(CHANNELS),
      result: v.pipe(
        v.string(),
        v.metadata({
          description: '"replayed", "would replay", "would replay to the user\'s new address", or "skipped: <why>"',
        }),
      ),
      to: v.pipe(
        v.nullable(v.string()),
        v.metadata({ description: "The user's address now, where it went or would go; null when skipped" }),
      ),
      previous_to: v.pipe(
        v.string(),
        v.metadata({ description: "The address in the letter: where the failed send went" }),
      ),
    }),
  ),
});

/** Path parameter of GET /api/v1/dead-letters/{seq}. */
export const DeadLetterSeq = v.pipe(
  v.string(),
  v.regex(/^\d{1,15}$/, "seq must be a dead letter's sequence, a positive integer"),
  v.transform(Number),
  v.minValue(1, "seq must be a dead letter's sequence, a positive integer"),
);

export const DeadLetterDetail = v.object({
  seq: v.number(),
  dead_lettered_at: v.string(),
  letter: v.pipe(
    v.looseObject({ class: v.picklist(DEAD_LETTER_CLASSES), reason: v.string(), channel: v.picklist(CHANNELS) }),
    v.metadata({
      description:
        "The dead letter as stored: class, reason, channel, lane, provider, attempts, the original request (notification), the rendered work item (item, with the address in `to`) and every attempt (history)",
    }),
  ),
  status_now: v.nullable(
    v.object({
      notification_id: v.string(),
      channel: v.picklist(CHANNELS),
      status: v.string(),
      reason: v.nullable(v.string()),
      attempts: v.number(),
    }),
  ),
  status_history: v.array(
    v.object({ status: v.string(), reason: v.nullable(v.string()), attempt: v.number(), at: v.string() }),
  ),
});
