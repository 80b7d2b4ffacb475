import { SUPPRESSIBLE_CHANNELS, SUPPRESSION_REASONS } from "@notify/db";
import * as v from "valibot";
import { limitParam } from "../pagination.js";

/** Page size of GET /api/v1/suppressions when none is asked for; larger limits are clamped to the most. */
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 500;
/** The longest note a caller may keep with its entry. */
export const MAX_NOTE = 500;

const SCOPES = ["client", "all_clients"] as const;
export type EntryScope = (typeof SCOPES)[number];

const Scope = v.picklist(SCOPES, "scope must be client or all_clients");
const Reason = v.picklist(SUPPRESSION_REASONS, `reason must be one of ${SUPPRESSION_REASONS.join(", ")}`);

/** A caller's note: why it added or removed an entry. */
const Note = v.pipe(
  v.string("note must be a string"),
  v.maxLength(MAX_NOTE, `note must be at most ${MAX_NOTE} characters`),
  v.regex(/^[^\p{Cc}]*$/u, "note must not contain control characters"),
);

/** Body of PUT /api/v1/suppressions/{channel}/{address} (optional: an empty body is `{}`). */
export const PutSuppressionRequest = v.strictObject({
  reason: v.optional(Reason, "manual"),
  note: v.optional(Note),
  /** all_clients: the entry holds for every client (operator keys only). */
  scope: v.optional(Scope, "client"),
});

/** Query of DELETE /api/v1/suppressions/{channel}/{address}. */
export const DeleteSuppressionQuery = v.strictObject({
  scope: v.optional(Scope, "client"),
  /** Why the entry is lifted (a bounce the user has since fixed): logged with the key that lifted it. */
  note: v.optional(Note),
});

/** Query of GET /api/v1/suppressions (cursor pagination, newest first). */
export const ListSuppressionsQuery = v.strictObject({
  channel: v.optional(v.picklist(SUPPRESSIBLE_CHANNELS, `channel must be one of ${SUPPRESSIBLE_CHANNELS.join(", ")}`)),
  reason: v.optional(Reason),
  /** Entries whose address starts with this (compared as addresses are kept: an email lower-cased). */
  address_prefix: v.optional(
    v.pipe(
      v.string(),
      v.minLength(1, "address_prefix must not be empty"),
      v.maxLength(320, "address_prefix must be at most 320 characters"),
    ),
  ),
  /** The next_cursor of the previous page, unchanged. */
  cursor: v.optional(v.pipe(v.string(), v.maxLength(4096, "cursor is not a cursor of this list"))),
  limit: limitParam(DEFAULT_LIMIT, MAX_LIMIT),
  /** Operator keys only: a client's id (its entries and every client's), or * for every entry. */
  client: v.optional(
    v.pipe(v.string(), v.minLength(1, "client must be a client id or *"), v.maxLength(256, "client is too long")),
  ),
});
export type ListSuppressionsQuery = v.InferOutput<typeof ListSuppressionsQuery>;
