import * as v from "valibot";

export const DEFAULT_PAGE_SIZE = 50;
/** Larger page sizes are clamped to this, not refused (STANDARDS: pagination). */
export const MAX_PAGE_SIZE = 200;

/** Body of POST /api/v1/audiences. */
export const CreateAudienceRequest = v.strictObject({
  name: v.pipe(
    v.string("name must be a string"),
    v.trim(),
    v.minLength(1, "name must not be empty"),
    v.maxLength(200, "name must be at most 200 characters"),
    v.regex(/^[^\p{Cc}]+$/u, "name must not contain control characters"),
  ),
});

const positiveInteger = (field: string) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, `${field} must be a positive integer`),
    v.transform(Number),
    v.safeInteger(`${field} is too large`),
    v.minValue(1, `${field} must be a positive integer`),
  );

/** Query of GET /api/v1/audiences (offset pagination). */
export const ListAudiencesQuery = v.strictObject({
  page: v.optional(positiveInteger("page"), "1"),
  page_size: v.optional(
    v.pipe(
      positiveInteger("page_size"),
      v.transform((size) => Math.min(size, MAX_PAGE_SIZE)),
    ),
    String(DEFAULT_PAGE_SIZE),
  ),
});

export const AudienceResponse = v.object({
  id: v.string(),
  name: v.string(),
  member_count: v.number(),
  created_at: v.string(),
  updated_at: v.string(),
});

export const AudiencePage = v.object({
  data: v.array(AudienceResponse),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});

export const ImportResponse = v.object({
  audience_id: v.string(),
  received: v.number(),
  added: v.number(),
  member_count: v.number(),
});
