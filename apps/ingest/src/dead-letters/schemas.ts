import { CHANNELS, DEAD_LETTER_CLASSES } from "@notify/core";
import * as v from "valibot";
import { offsetPageQuery } from "../pagination.js";

const instant = (field: string) =>
  v.pipe(
    v.string(),
    v.isoTimestamp(`${field} must be an RFC 3339 timestamp, e.g. 2026-11-21T00:00:00Z`),
    v.transform((s) => new Date(s)),
  );

/** Query of GET /api/v1/dead-letters (offset pagination). */
export const ListDeadLettersQuery = v.strictObject({
  ...offsetPageQuery,
  channel: v.optional(v.picklist(CHANNELS, `channel must be one of ${CHANNELS.join(", ")}`)),
  class: v.optional(v.picklist(DEAD_LETTER_CLASSES, `class must be one of ${DEAD_LETTER_CLASSES.join(", ")}`)),
  /** Dead-lettered at or after. */
  since: v.optional(instant("since")),
  /** Dead-lettered at or before. */
  until: v.optional(instant("until")),
  notification_id: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(256))),
});
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

/**
 * Body of POST /api/v1/dead-letters/replay: which letters (sequences, filters, or all of them;
 * one of the three at least) and how. Filters select as the list's do; with sequences too, a
 * letter must be named and match.
 */
export const ReplayRequest = v.pipe(
  v.strictObject({
    seqs: v.optional(
      v.pipe(
        v.array(
          v.pipe(
            v.number("seqs must hold dead letters' sequences"),
            v.safeInteger("seqs must hold dead letters' sequences"),
            v.minValue(1, "seqs must hold dead letters' sequences"),
          ),
          "seqs must be an array of sequences",
        ),
        v.maxLength(1000, "seqs may name at most 1000 letters"),
      ),
    ),
    all: v.optional(v.boolean("all must be true or false")),
    channel: v.optional(v.picklist(CHANNELS, `channel must be one of ${CHANNELS.join(", ")}`)),
    class: v.optional(v.picklist(DEAD_LETTER_CLASSES, `class must be one of ${DEAD_LETTER_CLASSES.join(", ")}`)),
    /** Dead-lettered at or after. */
    since: v.optional(instant("since")),
    /** Dead-lettered at or before. */
    until: v.optional(instant("until")),
    notification_id: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(256))),
    /** Also resend letters whose provider may have accepted them (outcome unknown). */
    include_unsettled: v.optional(v.boolean("include_unsettled must be true or false")),
    /** Plan only: nothing is changed or sent. */
    dry_run: v.optional(v.boolean("dry_run must be true or false")),
  }),
  v.forward(
    v.check(
      (r) =>
        (r.seqs?.length ?? 0) > 0 ||
        r.all === true ||
        r.channel !== undefined ||
        r.class !== undefined ||
        r.since !== undefined ||
        r.until !== undefined ||
        r.notification_id !== undefined,
      "name letters by seqs, select them with a filter (channel, class, since, until, notification_id), or pass all: true",
    ),
    ["seqs"],
  ),
);
export type ReplayRequest = v.InferOutput<typeof ReplayRequest>;

export const ReplayAnswer = v.object({
  dry_run: v.boolean(),
  selected: v.pipe(
    v.number(),
    v.metadata({ description: "Channels selected (a channel counts once, by its latest letter)" }),
  ),
  replayed: v.number(),
  skipped: v.number(),
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
