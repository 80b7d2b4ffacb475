import { validate } from "@notify/http";
import type { Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import { listDeadLetters } from "../dead-letters/list.js";
import { ListDeadLettersQuery } from "../dead-letters/schemas.js";
import type { IngestDeps } from "../deps.js";
import { listUserNotifications } from "../notifications/list.js";
import { ListNotificationsQuery } from "../notifications/list-schemas.js";
import { parseUserIdParam } from "../preferences/schemas.js";

/**
 * The spec's two list conventions: a user's notifications by keyset cursor (user-facing, grows
 * while it is read), dead letters by page (an operator's list, with a total).
 */
export function mountLists(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "database" | "bus" | "cursorSecret">): void {
  v1.get("/users/:id/notifications", requireScope("read"), async (c) => {
    const userId = parseUserIdParam(c.req.param("id"));
    const query = validate(ListNotificationsQuery, c.req.query());
    return c.json(
      await listUserNotifications(deps.database, deps.cursorSecret, c.get("principal").clientId, userId, query),
    );
  });

  v1.get("/dead-letters", requireScope("admin"), async (c) =>
    c.json(await listDeadLetters(deps.bus, validate(ListDeadLettersQuery, c.req.query()))),
  );
}
