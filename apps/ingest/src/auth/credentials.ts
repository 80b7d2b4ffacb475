import type { Context } from "hono";

/**
 * The API's two credentials, told apart by their prefix so that either one sent to the other's
 * routes is answered with the one the route wants instead of "unknown": API keys (`ntf_`, an
 * application's, in X-API-Key or Authorization: Bearer) and inbox tokens (`ntu_`, one user's,
 * in X-Inbox-Token, for the /inbox routes only).
 */
export const INBOX_TOKEN_PREFIX = "ntu_";

/** The header a user's client sends its inbox token in (Authorization carries API keys). */
export const INBOX_TOKEN_HEADER = "x-inbox-token";

/** Where an inbox token comes from, for the answers that send a client there. */
export const INBOX_TOKEN_ROUTE = "POST /api/v1/users/{id}/inbox-tokens";

export const isInboxToken = (credential: string) => credential.startsWith(INBOX_TOKEN_PREFIX);

/** Query parameters that would carry a credential: refused, because URLs end up in logs. */
const CREDENTIAL_PARAMS = ["api_key", "apikey", "api-key", "key", "token", "access_token", "x-api-key"];

export function credentialInQuery(c: Context): boolean {
  if (!c.req.url.includes("?")) return false;
  const query = new URL(c.req.url).searchParams;
  return CREDENTIAL_PARAMS.some((name) => query.has(name));
}
