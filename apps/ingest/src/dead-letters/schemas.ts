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
