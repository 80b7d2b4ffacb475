import { limitBody, readJson, validate } from "@notify/http";
import type { Context, Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getContacts, type StoredContacts } from "../preferences/get-contacts.js";
import { putContacts } from "../preferences/put-contacts.js";
import { ContactsRequest, checkBodyUserId, parseUserIdParam } from "../preferences/schemas.js";

const answer = (c: Context<AuthEnv>, stored: StoredContacts) => {
  if (stored.updatedAt) c.header("last-modified", stored.updatedAt.toUTCString());
  return c.json(stored.contacts, 200);
};

/**
 * A user's addresses for email and SMS (push uses the preferences' device tokens, in-app the
 * user id), scope `preferences`: they are personal data of the same kind.
 */
export function mountUsers(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "database" | "lookupKey" | "maxBodyBytes">): void {
  const scope = requireScope("preferences");

  v1.get("/users/:id/contacts", scope, async (c) =>
    answer(c, await getContacts(deps.database, parseUserIdParam(c.req.param("id")))),
  );

  v1.put("/users/:id/contacts", limitBody(deps.maxBodyBytes), scope, async (c) => {
    const userId = parseUserIdParam(c.req.param("id"));
    const input = validate(ContactsRequest, await readJson(c));
    checkBodyUserId(userId, input.user_id);
    const stored = await putContacts(deps.database, userId, input);
    c.get("log").info({ user_id: userId }, "contacts replaced");
    return answer(c, stored);
  });
}
