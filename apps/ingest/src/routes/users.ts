import { validate } from "@notify/core";
import { limitBody, readJson } from "@notify/http";
import type { Context, Hono } from "hono";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getContacts, type StoredContacts } from "../preferences/get-contacts.js";
import { putContacts } from "../preferences/put-contacts.js";
import { ContactsRequest, ContactsResponse, checkBodyUserId, parseUserIdParam } from "../preferences/schemas.js";
import { spreadProfileChange } from "./announce.js";
import { contract } from "./contract.js";

const answer = (c: Context<AuthEnv>, stored: StoredContacts) => {
  if (stored.updatedAt) c.header("last-modified", stored.updatedAt.toUTCString());
  return c.json(stored.contacts, 200);
};

/**
 * A user's addresses for email and SMS (push uses the preferences' device tokens, in-app the
 * user id), scope `contacts`: an address decides where every client's messages go (one-time
 * passcodes included), so writing one is a grant of its own, and each change is recorded with
 * the key that made it.
 */
export function mountUsers(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "bus" | "lookupKey" | "maxBodyBytes">,
): void {
  v1.get(
    "/users/:id/contacts",
    contract({
      summary: "Read a user's contact addresses",
      tag: "Users",
      scope: "contacts",
      responses: { 200: { description: "Email address and phone number", schema: ContactsResponse } },
      problems: ["validation_failed"],
    }),
    async (c) => answer(c, await getContacts(deps.database, parseUserIdParam(c.req.param("id")))),
  );

  v1.put(
    "/users/:id/contacts",
    contract({
      summary: "Replace a user's contact addresses",
      description: "The addresses the email and SMS channels deliver to; the phone number is E.164.",
      tag: "Users",
      scope: "contacts",
      body: ContactsRequest,
      responses: { 200: { description: "The stored addresses", schema: ContactsResponse } },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      const input = validate(ContactsRequest, await readJson(c));
      checkBodyUserId(userId, input.user_id);
      const { clientId, keyId } = c.get("principal");
      const stored = await putContacts(deps.database, userId, input, { clientId, keyId });
      c.get("log").info({ user_id: userId }, "contacts replaced");
      await spreadProfileChange(c.get("log"), deps.bus, userId);
      return answer(c, stored);
    },
  );
}
