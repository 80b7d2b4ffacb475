import { AppError, type MemberFormat, memberBatches, newId } from "@notify/core";
import { createAudience, getAudience, importAudienceMembers, listAudiences, setAudienceMember } from "@notify/db";
import { limitBody, readJson, validate } from "@notify/http";
import type { Hono } from "hono";
import { CreateAudienceRequest, ListAudiencesQuery } from "../audiences/schemas.js";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import { asDependencyError } from "../dependency.js";
import type { IngestDeps } from "../deps.js";
import { parseUserIdParam } from "../preferences/schemas.js";

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
    throw asDependencyError(error, "postgres");
  }
}

/**
 * Audiences (scope `admin`): stored sets of user ids that broadcasts go to. The import reads
 * its body as a stream, a batch at a time, so an audience of millions never sits in memory;
 * it is the one body without MAX_BODY_BYTES.
 */
export function mountAudiences(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "database" | "maxBodyBytes">): void {
  const { database } = deps;
  const admin = requireScope("admin");

  v1.post("/audiences", limitBody(deps.maxBodyBytes), admin, async (c) => {
    const input = validate(CreateAudienceRequest, await readJson(c));
    const audience = await postgres(() => createAudience(database, newId(), input.name));
    c.header("location", `/api/v1/audiences/${audience.id}`);
    return c.json(audience, 201);
  });

  v1.get("/audiences", admin, async (c) => {
    const query = validate(ListAudiencesQuery, c.req.query());
    const { data, total } = await postgres(() => listAudiences(database, query.page, query.page_size));
    return c.json({ data, page: query.page, page_size: query.page_size, total_count: total });
  });

  v1.get("/audiences/:id", admin, async (c) => {
    const id = c.req.param("id");
    const audience = await postgres(() => getAudience(database, id));
    if (!audience) throw notFound(id);
    return c.json(audience);
  });

  v1.post("/audiences/:id/members/import", admin, async (c) => {
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
    c.get("log").info({ audience_id: id, received: result.received, added: result.added }, "audience members imported");
    return c.json({ audience_id: id, ...result, member_count: audience?.member_count ?? 0 });
  });

  v1.put("/audiences/:id/members/:userId", admin, async (c) => {
    const id = c.req.param("id");
    const userId = parseUserIdParam(c.req.param("userId"));
    if (!(await postgres(() => setAudienceMember(database, id, userId, true)))) throw notFound(id);
    return c.body(null, 204);
  });

  v1.delete("/audiences/:id/members/:userId", admin, async (c) => {
    const id = c.req.param("id");
    const userId = parseUserIdParam(c.req.param("userId"));
    if (!(await postgres(() => setAudienceMember(database, id, userId, false)))) throw notFound(id);
    return c.body(null, 204);
  });
}
