import { limitBody, readJson, validate } from "@notify/http";
import type { Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import { createBroadcast } from "../broadcasts/create.js";
import { cancelBroadcast, getBroadcast } from "../broadcasts/progress.js";
import { BroadcastRequest } from "../broadcasts/schemas.js";
import type { IngestDeps } from "../deps.js";
import { parseIdempotencyKey } from "./notifications.js";

/**
 * Broadcasts (spec rule 11), scope `admin`: one request reaches a whole audience, so it takes
 * the scope that manages audiences rather than the everyday `ingest`.
 */
export function mountBroadcasts(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "templates" | "maxBodyBytes">,
): void {
  const admin = requireScope("admin");

  v1.post("/broadcasts", limitBody(deps.maxBodyBytes), admin, async (c) => {
    const idempotencyKey = parseIdempotencyKey(c.req.header("idempotency-key"));
    const request = validate(BroadcastRequest, await readJson(c));
    const result = await createBroadcast(deps, { clientId: c.get("principal").clientId, idempotencyKey, request });
    c.header("location", `/api/v1/broadcasts/${result.broadcastId}`);
    if (result.kind === "replayed") {
      c.header("idempotent-replayed", "true");
      return c.json({ broadcast_id: result.broadcastId, status: result.status, total: result.total }, 200);
    }
    c.get("log").info({ broadcast_id: result.broadcastId, total: result.total }, "broadcast accepted");
    return c.json({ broadcast_id: result.broadcastId, status: "expanding", total: result.total }, 202);
  });

  v1.get("/broadcasts/:id", admin, async (c) =>
    c.json(await getBroadcast(deps.database, c.get("principal").clientId, c.req.param("id"))),
  );

  v1.post("/broadcasts/:id/cancel", admin, async (c) => {
    const view = await cancelBroadcast(deps.database, c.get("principal").clientId, c.req.param("id"));
    c.get("log").info({ broadcast_id: view.broadcast_id, expanded: view.expanded }, "broadcast cancelled");
    return c.json(view);
  });
}
