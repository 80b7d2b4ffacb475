import { MEMBER_BATCH } from "@notify/core";
import {
  AudiencePage,
  AudienceResponse,
  CreateAudienceRequest,
  ImportResponse,
  ListAudiencesQuery,
} from "../audiences/schemas.js";
import type { RouteDoc } from "./registry.js";

/** Audiences: stored sets of user ids that broadcasts go to (admin scope). */
export const AUDIENCE_ROUTES: RouteDoc[] = [
  {
    method: "post",
    path: "/audiences",
    summary: "Create an audience",
    tag: "Audiences",
    scope: "admin",
    body: CreateAudienceRequest,
    responses: {
      201: {
        description: "The audience, empty",
        schema: AudienceResponse,
        headers: { Location: "The audience's URL" },
      },
    },
    problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"],
  },
  {
    method: "get",
    path: "/audiences",
    summary: "List audiences",
    description: "Newest first, offset pagination: page_size 50 by default, clamped to 200.",
    tag: "Audiences",
    scope: "admin",
    query: ListAudiencesQuery,
    responses: { 200: { description: "One page", schema: AudiencePage } },
    problems: ["validation_failed"],
  },
  {
    method: "get",
    path: "/audiences/{id}",
    summary: "Read an audience and its member count",
    tag: "Audiences",
    scope: "admin",
    responses: { 200: { description: "The audience", schema: AudienceResponse } },
    problems: ["not_found"],
  },
  {
    method: "post",
    path: "/audiences/{id}/members/import",
    summary: "Import members (streamed NDJSON or CSV)",
    description: `The body is read as a stream and stored ${MEMBER_BATCH} members per statement, so its size is not limited by MAX_BODY_BYTES and millions of members never sit in memory. Content-Type application/x-ndjson: one JSON string or {"user_id": …} per line; text/csv: the user id in the first column, an optional user_id header. Members already present are kept once. All or nothing: a bad line (named by number in a 400) leaves the audience as it was.`,
    tag: "Audiences",
    scope: "admin",
    headers: [
      { name: "Content-Type", required: true, description: "application/x-ndjson (or application/jsonl) or text/csv" },
    ],
    responses: { 200: { description: "Lines read, members added, members now", schema: ImportResponse } },
    problems: ["validation_failed", "unsupported_media_type", "not_found"],
  },
  {
    method: "put",
    path: "/audiences/{id}/members/{userId}",
    summary: "Add a member",
    description: "Idempotent: adding a member twice keeps it once.",
    tag: "Audiences",
    scope: "admin",
    responses: { 204: { description: "The user is a member" } },
    problems: ["validation_failed", "not_found"],
  },
  {
    method: "delete",
    path: "/audiences/{id}/members/{userId}",
    summary: "Remove a member",
    description: "Idempotent. A broadcast already past this member has sent it its notification.",
    tag: "Audiences",
    scope: "admin",
    responses: { 204: { description: "The user is not a member" } },
    problems: ["validation_failed", "not_found"],
  },
];
