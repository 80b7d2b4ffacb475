import { limitBody, readJson, validate } from "@notify/http";
import type { Context, Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getPreferences, type StoredPreferences } from "../preferences/get-preferences.js";
import { putPreferences } from "../preferences/put-preferences.js";
import { checkBodyUserId, PreferencesRequest, parseUserIdParam } from "../preferences/schemas.js";

const answer = (c: Context<AuthEnv>, stored: StoredPreferences) => {
  if (stored.updatedAt) c.header("last-modified", stored.updatedAt.toUTCString());
  return c.json(stored.preferences, 200);
};

/**
 * The user preference document (spec: User preferences), scope `preferences`. Users are not
 * owned by a client: any key with the scope reads and writes any user's preferences (spec:
 * Authentication rule 9, a key is no per-user authorisation).
 */
export function mountPreferences(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "lookupKey" | "maxBodyBytes">,
): void {
  const scope = requireScope("preferences");

  v1.get("/users/:id/preferences", scope, async (c) =>
    answer(c, await getPreferences(deps.database, parseUserIdParam(c.req.param("id")))),
  );

  v1.put("/users/:id/preferences", limitBody(deps.maxBodyBytes), scope, async (c) => {
    const userId = parseUserIdParam(c.req.param("id"));
    const input = validate(PreferencesRequest, await readJson(c));
    checkBodyUserId(userId, input.user_id);
    const stored = await putPreferences(deps.database, userId, input);
    c.get("log").info({ user_id: userId }, "preferences replaced");
    return answer(c, stored);
  });
}
