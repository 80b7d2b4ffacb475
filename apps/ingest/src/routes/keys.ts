import { AppError } from "@notify/core";
import { createKey, getKey, listKeys, revokeKey, rotateKey } from "@notify/db";
import { limitBody, readJson, validate } from "@notify/http";
import type { Context, Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import { asDependencyError } from "../dependency.js";
import type { IngestDeps } from "../deps.js";
import { CreateKeyRequest, ListKeysQuery, RotateKeyRequest } from "../keys/schemas.js";

const postgres = <T>(work: Promise<T>): Promise<T> =>
  work.catch((error: unknown) => {
    throw asDependencyError(error, "postgres");
  });

const unknownKey = (id: string) => new AppError("not_found", `API key ${id} does not exist`);

/** A body is optional on rotate: an empty one stands for `{}`. */
async function readOptionalJson(c: Context): Promise<unknown> {
  return (await c.req.text()).trim() === "" ? {} : readJson(c);
}

/**
 * The admin API for API keys (spec: Authentication rules 7 and 8). Admin keys manage the keys
 * of every client. Answers that carry a plaintext key are never cached.
 */
export function mountKeys(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  const admin = requireScope("admin");

  v1.post("/keys", limitBody(deps.maxBodyBytes), admin, async (c) => {
    const body = validate(CreateKeyRequest, await readJson(c));
    const issued = await postgres(
      createKey(deps.database, {
        clientId: body.client_id,
        name: body.name,
        scopes: body.scopes,
        rateLimit: body.rate_limit && { burst: body.rate_limit.burst, perSecond: body.rate_limit.per_second },
      }),
    );
    c.get("log").info({ target_key_id: issued.id, target_client_id: issued.client_id }, "API key created");
    c.header("cache-control", "no-store");
    c.header("location", `/api/v1/keys/${issued.id}`);
    return c.json(issued, 201);
  });

  v1.get("/keys", admin, async (c) => {
    const query = validate(ListKeysQuery, c.req.query());
    const { data, total_count } = await postgres(
      listKeys(deps.database, {
        clientId: query.client_id,
        includeRevoked: query.include_revoked,
        page: query.page,
        pageSize: query.page_size,
      }),
    );
    return c.json({ data, page: query.page, page_size: query.page_size, total_count });
  });

  v1.get("/keys/:id", admin, async (c) => {
    const id = c.req.param("id");
    const key = await postgres(getKey(deps.database, id));
    if (!key) throw unknownKey(id);
    return c.json(key);
  });

  v1.post("/keys/:id/rotate", limitBody(deps.maxBodyBytes), admin, async (c) => {
    const id = c.req.param("id");
    const body = validate(RotateKeyRequest, await readOptionalJson(c));
    const rotated = await postgres(rotateKey(deps.database, id, { graceSeconds: body.grace_seconds }));
    if (!rotated) throw unknownKey(id);
    c.get("log").info(
      { target_key_id: rotated.id, replaced_key_id: id, replaced_until: rotated.previous.revoked_at },
      "API key rotated",
    );
    c.header("cache-control", "no-store");
    c.header("location", `/api/v1/keys/${rotated.id}`);
    return c.json(rotated, 201);
  });

  v1.delete("/keys/:id", admin, async (c) => {
    const id = c.req.param("id");
    const revoked = await postgres(revokeKey(deps.database, id));
    if (!revoked) throw unknownKey(id);
    c.get("log").info({ target_key_id: id, target_client_id: revoked.client_id }, "API key revoked");
    return c.body(null, 204);
  });
}
