import * as v from "valibot";
import { offsetPageQuery } from "../pagination.js";

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

/** Query of GET /api/v1/audiences (offset pagination). */
export const ListAudiencesQuery = v.strictObject({
  ...offsetPageQuery,
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
