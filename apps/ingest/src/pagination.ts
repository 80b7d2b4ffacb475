import * as v from "valibot";

/** Offset pagination of admin lists: documented defaults. */
export const DEFAULT_PAGE_SIZE = 50;
/** Larger page sizes are clamped to this, not refused. */
export const MAX_PAGE_SIZE = 200;

const positiveInteger = (field: string) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, `${field} must be a positive integer`),
    v.transform(Number),
    v.safeInteger(`${field} is too large`),
    v.minValue(1, `${field} must be a positive integer`),
  );

/** `page` (from 1) and `page_size` query entries, to spread into a list's query schema. */
export const offsetPageQuery = {
  page: v.optional(positiveInteger("page"), "1"),
  page_size: v.optional(
    v.pipe(
      positiveInteger("page_size"),
      v.transform((size) => Math.min(size, MAX_PAGE_SIZE)),
    ),
    String(DEFAULT_PAGE_SIZE),
  ),
};

/**
 * A `limit` query entry of a cursor or search list: a positive integer, `fallback` when absent,
 * clamped to `max` (not refused).
 */
export const limitParam = (fallback: number, max: number) =>
  v.optional(
    v.pipe(
      positiveInteger("limit"),
      v.transform((n) => Math.min(n, max)),
    ),
    String(fallback),
  );
