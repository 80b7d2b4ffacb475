import { AppError, MEMBER_BATCH, type MemberFormat, memberBatches, newId, validate } from "@notify/core";
import { createAudience, getAudience, importAudienceMembers, listAudiences, setAudienceMember } from "@notify/db";
import { limitBody, readJson, toAppError } from "@notify/http";
import type { Hono } from "hono";
import {
  AudiencePage,
  AudienceResponse,
  CreateAudienceRequest,
  ImportResponse,
  ListAudiencesQuery,
} from "../audiences/schemas.js";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { parseUserIdParam } from "../preferences/schemas.js";
import { type Contract, contract } from "./contract.js";

/** Audiences: stored sets of user ids that broadcasts go to (broadcast scope). */
const audiences = (route: Omit<Contract, "tag" | "scope">) =>
  contract({ ...route, tag: "Audiences", scope: "broadcast" });

const FORMATS: Record<string, MemberFormat> = {
  "application/x-ndjson": "ndjson",
  "application/jsonl": "ndjson",
  "text/csv": "csv",
};

const notFound = (id: string) => new AppError("not_found", `audience ${id} does not exist`);

async function postgres<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw toAppError(error);
  }
}

/**
 * Audiences (scope `broadcast`): stored sets of user ids that broadcasts go to. The import reads
 * its body as a stream, a batch at a time, so an audience of millions never sits in memory;
 * it is the one body without MAX_BODY_BYTES.
 */
export function mountAudiences(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "database" | "maxBodyBytes">): void {
  const { database } = deps;

  v1.post(
    "/audiences",
    audiences({
      summary: "Create an audience",
      body: CreateAudienceRequest,
      responses: {
        201: {
          description: "The audience, empty",
          schema: AudienceResponse,
          headers: { Location: "The audience's URL" },
        },
      },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const input = validate(CreateAudienceRequest, await readJson(c));
      const audience = await postgres(() => createAudience(database, newId(), input.name));
      c.header("location", `/api/v1/audiences/${audience.id}`);
      return c.json(audience, 201);
    },
  );

  v1.get(
    "/audiences",
    audiences({
      summary: "List audiences",
      description: "Newest first, offset pagination: page_size 50 by default, clamped to 200.",
      query: ListAudiencesQuery,
      responses: { 200: { description: "One page", schema: AudiencePage } },
      problems: ["validation_failed"],
    }),
    async (c) => {
      const query = validate(ListAudiencesQuery, c.req.query());
      const { data, total } = await postgres(() => listAudiences(database, query.page, query.page_size));
      return c.json({ data, page: query.page, page_size: query.page_size, total_count: total });
    },
  );

  v1.get(
    "/audiences/:id",
    audiences({
      summary: "Read an audience and its member count",
      responses: { 200: { description: "The audience", schema: AudienceResponse } },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const audience = await postgres(() => getAudience(database, id));
      if (!audience) throw notFound(id);
      return c.json(audience);
    },
  );

  v1.post(
    "/audiences/:id/members/import",
    audiences({
      summary: "Import members (streamed NDJSON or CSV)",
      description: `The body is read as a stream and stored ${MEMBER_BATCH} members per statement, so its size is not limited by MAX_BODY_BYTES and millions of members never sit in memory. Content-Type application/x-ndjson: one JSON string or {"user_id": …} per line; text/csv: the user id in the first column, an optional user_id header. Members already present are kept once. All or nothing: a bad line (named by number in a 400) leaves the audience as it was.`,
      headers: [
        {
          name: "Content-Type",
          required: true,
          description: "application/x-ndjson (or application/jsonl) or text/csv",
        },
      ],
      responses: { 200: { description: "Lines read, members added, members now", schema: ImportResponse } },
      problems: ["validation_failed", "unsupported_media_type", "not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const type = (c.req.header("content-type") ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
      const format = FORMATS[type];
      if (!format) {
        throw new AppError(
          "unsupported_media_type",
          'send application/x-ndjson (one user id or {"user_id"} per line) or text/csv (user id in the first column)',
        );
      }
      const body = c.req.raw.body;
      const chunks: AsyncIterable<Uint8Array> = body ?? (async function* () {})();
      const result = await postgres(() => importAudienceMembers(database, id, memberBatches(chunks, format)));
      if (!result) throw notFound(id);
      const audience = await postgres(() => getAudience(database, id));
      c.get("log").info(
        { audience_id: id, received: result.received, added: result.added },
        "audience members imported",
      );
      return c.json({ audience_id: id, ...result, member_count: audience?.member_count ?? 0 });
    },
  );

  v1.put(
    "/audiences/:id/members/:userId",
    audiences({
      summary: "Add a member",
      description: "Idempotent: adding a member twice keeps it once.",
      responses: { 204: { description: "The user is a member" } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const userId = parseUserIdParam(c.req.param("userId"));
      if (!(await postgres(() => setAudienceMember(database, id, userId, true)))) throw notFound(id);
      return c.body(null, 204);
    },
  );

  v1.delete(
    "/audiences/:id/members/:userId",
    audiences({
      summary: "Remove a member",
      description: "Idempotent. A broadcast already past this member has sent it its notification.",
      responses: { 204: { description: "The user is not a member" } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const userId = parseUserIdParam(c.req.param("userId"));
      if (!(await postgres(() => setAudienceMember(database, id, userId, false)))) throw notFound(id);
      return c.body(null, 204);
    },
  );
}
