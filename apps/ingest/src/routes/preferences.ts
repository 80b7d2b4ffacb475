import { validate } from "@notify/core";
import { limitBody, readJson } from "@notify/http";
import type { Context, Hono } from "hono";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getPreferences, type StoredPreferences } from "../preferences/get-preferences.js";
import { putPreferences } from "../preferences/put-preferences.js";
import {
  checkBodyUserId,
  DevelopmentPreferencesRequest,
  PreferencesRequest,
  PreferencesResponse,
  parseUserIdParam,
} from "../preferences/schemas.js";
import { spreadProfileChange } from "./announce.js";
import { contract } from "./contract.js";

const answer = (c: Context<AuthEnv>, stored: StoredPreferences) => {
  if (stored.updatedAt) c.header("last-modified", stored.updatedAt.toUTCString());
  return c.json(stored.preferences, 200);
};

/**
 * The user preference document, scope `preferences`. Users are not
 * owned by a client: any key with the scope reads and writes any user's preferences (a key
 * is no per-user authorisation).
 */
export function mountPreferences(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "bus" | "lookupKey" | "maxBodyBytes" | "allowPrivatePushEndpoints">,
): void {
  const request = deps.allowPrivatePushEndpoints ? DevelopmentPreferencesRequest : PreferencesRequest;

  v1.get(
    "/users/:id/preferences",
    contract({
      summary: "Read a user's preferences",
      description:
        "A user without a stored document gets the defaults (no opt-outs, no quiet hours, no cap, no time zone).",
      tag: "Users",
      scope: "preferences",
      responses: {
        200: {
          description: "The preferences document",
          schema: PreferencesResponse,
          headers: { "Last-Modified": "When it was last replaced" },
        },
      },
      problems: ["validation_failed"],
    }),
    async (c) => answer(c, await getPreferences(deps.database, parseUserIdParam(c.req.param("id")))),
  );

  v1.put(
    "/users/:id/preferences",
    contract({
      summary: "Replace a user's preferences",
      description:
        "Replaces the whole document. Quiet hours are HH:MM in an IANA time zone (a window may cross midnight); device tokens are Web Push subscriptions; time_zone, an IANA time zone or null, is where a notification's send_at_local is read (null: the quiet hours' zone, else UTC). The processor sees a change within 5 s.",
      tag: "Users",
      scope: "preferences",
      body: PreferencesRequest,
      responses: { 200: { description: "The stored document", schema: PreferencesResponse } },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      const input = validate(request, await readJson(c));
      checkBodyUserId(userId, input.user_id);
      const stored = await putPreferences(deps.database, userId, input);
      c.get("log").info({ user_id: userId }, "preferences replaced");
      await spreadProfileChange(c.get("log"), deps.bus, userId);
      return answer(c, stored);
    },
  );
}
