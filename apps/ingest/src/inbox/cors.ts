import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { INBOX_TOKEN_HEADER } from "../auth/credentials.js";

/** How long a browser may keep a preflight's answer before it asks again. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * CORS for the inbox routes alone: the inbox components run in the caller's product page, on
 * another origin, and send X-Inbox-Token (a custom header, so every call is preflighted). Pages
 * of `origins` (`*`: any) may call them. No answer allows credentials: the token travels in a
 * header, never in a cookie, so a page can only call with a token its own backend minted for its
 * user, and a page of any other site holds none; a cookie would be sent by the browser for
 * whatever page asked. Routes that take an API key get no CORS at all: a key belongs on a server,
 * never in a browser.
 */
export function inboxCors(origins: "*" | readonly string[]): MiddlewareHandler {
  const allowed = origins === "*" ? "*" : [...origins];
  return cors({
    origin: allowed,
    allowMethods: ["GET", "POST", "PATCH"],
    allowHeaders: [INBOX_TOKEN_HEADER, "content-type", "last-event-id"],
    exposeHeaders: ["retry-after", "x-request-id"],
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
    credentials: false,
  });
}
