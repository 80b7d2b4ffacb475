import * as v from "valibot";
import { CHANNELS } from "./channels.js";
import { DEAD_LETTER_CLASSES } from "./dead-letter.js";
import { instant } from "./instant.js";

/** How many dead letters one replay selected by filters or `all` takes at most; `remaining` says what is left. */
export const REPLAY_BATCH_LIMIT = 1000;
/**
 * How many dead letters one replay selected by filters looks at at most: filters that match few
 * letters of a long stream answer in bounded time too, with `remaining` and `next_seq` to go on.
 */
export const REPLAY_SCAN_LIMIT = 50 * REPLAY_BATCH_LIMIT;

const sequence = (message: string) => v.pipe(v.number(message), v.safeInteger(message), v.minValue(1, message));

/**
 * The filters that select dead letters, as the list (GET /api/v1/dead-letters), the processor's
 * notify.ops.dlq.list and a replay take them: a letter must match every one given.
 */
export const deadLetterFilters = {
  channel: v.optional(v.picklist(CHANNELS, `channel must be one of ${CHANNELS.join(", ")}`)),
  class: v.optional(v.picklist(DEAD_LETTER_CLASSES, `class must be one of ${DEAD_LETTER_CLASSES.join(", ")}`)),
  /** Dead-lettered at or after. */
  since: v.optional(instant("since")),
  /** Dead-lettered at or before. */
  until: v.optional(instant("until")),
  notification_id: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(256))),
};
type DeadLetterFilterValues = v.InferOutput<v.ObjectSchema<typeof deadLetterFilters, undefined>>;

const replayEntries = {
  seqs: v.optional(
    v.pipe(
      v.array(sequence("seqs must hold dead letters' sequences"), "seqs must be an array of sequences"),
      v.maxLength(REPLAY_BATCH_LIMIT, `seqs may name at most ${REPLAY_BATCH_LIMIT} letters`),
    ),
  ),
  all: v.optional(v.boolean("all must be true or false")),
  ...deadLetterFilters,
  /** Also resend letters whose provider may have accepted them (outcome unknown). */
  include_unsettled: v.optional(v.boolean("include_unsettled must be true or false")),
  /** Plan only: nothing is changed or sent. */
  dry_run: v.optional(v.boolean("dry_run must be true or false")),
  /**
   * A selection by filters or `all` starts at this dead letter's sequence: the previous
   * answer's `next_seq`, when it had `remaining` letters.
   */
  from_seq: v.optional(sequence("from_seq must be a dead letter's sequence")),
};

/** Whether a replay selects letters somehow (by sequence, a filter or `all`): one is required. */
const selectsLetters = (r: { seqs?: number[] | undefined; all?: boolean | undefined } & DeadLetterFilterValues) =>
  (r.seqs?.length ?? 0) > 0 ||
  r.all === true ||
  r.channel !== undefined ||
  r.class !== undefined ||
  r.since !== undefined ||
  r.until !== undefined ||
  r.notification_id !== undefined;
const SELECT_LETTERS =
  "name letters by seqs, select them with a filter (channel, class, since, until, notification_id), or pass all: true";
/**
 * A dead-letter replay request: the body of POST /api/v1/dead-letters/replay. Which letters
 * (sequences, filters, or all of them; one of the three at least) and how. Filters select as the
 * list's do; with sequences too, a letter must be named and match.
 */
export const ReplayRequest = v.pipe(
  v.strictObject(replayEntries),
  v.forward(
    v.check((r) => selectsLetters(r), SELECT_LETTERS),
    ["seqs"],
  ),
);
export type ReplayRequest = v.InferOutput<typeof ReplayRequest>;

/**
 * Who asked for an operator's request: the API key's id and its client, as ingest authenticated
 * it. The processor logs each replay with it.
 */
export const RequestedBy = v.strictObject({
  key_id: v.pipe(v.string("key_id must be a string"), v.minLength(1), v.maxLength(256)),
  client_id: v.pipe(v.string("client_id must be a string"), v.minLength(1), v.maxLength(256)),
});
export type RequestedBy = v.InferOutput<typeof RequestedBy>;

/**
 * What ingest sends the processor on notify.ops.replay: the replay request and `requested_by`,
 * the key that asked. The processor validates it again (it alone runs a replay, whoever sent
 * the message).
 */
export const ReplayMessage = v.pipe(
  v.strictObject({ ...replayEntries, requested_by: RequestedBy }),
  v.forward(
    v.check((r) => selectsLetters(r), SELECT_LETTERS),
    ["seqs"],
  ),
);
export type ReplayMessage = v.InferOutput<typeof ReplayMessage>;

/** What a replay answers (the processor to ingest, ingest to the operator). */
export interface ReplayAnswer {
  dry_run: boolean;
  selected: number;
  replayed: number;
  skipped: number;
  /** Letters of a selection by filters or `all` left past the batch limit, not looked at (0: none). */
  remaining: number;
  /** Where the rest starts (from_seq of the next request); null when nothing remains. */
  next_seq: number | null;
  data: Array<{
    seq: number;
    notification_id: string;
    channel: string;
    result: string;
    to: string | null;
    previous_to: string;
  }>;
}
