import { randomBytes } from "node:crypto";
import { AppError, hashKey } from "@notify/core";
import { type Database, findInboxTokenOwner, type InboxOwner, insertInboxToken } from "@notify/db";
import { type AttemptThrottle, clientAddress } from "@notify/http";
import type { Context, MiddlewareHandler } from "hono";
import {
  credentialInQuery,
  INBOX_TOKEN_HEADER,
  INBOX_TOKEN_PREFIX,
  INBOX_TOKEN_ROUTE,
  isInboxToken,
} from "../auth/credentials.js";
import type { AuthEnv } from "../auth/middleware.js";

export interface IssuedInboxToken {
  token: string;
  user_id: string;
  expires_at: string;
}

/** Opaque and random like API keys (`ntu_` + 256 bits); only the SHA-256 is stored. */
export async function issueInboxToken(
  database: Database,
  input: { userId: string; clientId: string; keyId: string; ttlSeconds: number },
): Promise<IssuedInboxToken> {
  const token = `${INBOX_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  const expiresAt = new Date(Date.now() + input.ttlSeconds * 1000);
  await insertInboxToken(database, {
    tokenHash: hashKey(token),
    userId: input.userId,
    clientId: input.clientId,
    keyId: input.keyId,
    expiresAt,
  });
  return { token, user_id: input.userId, expires_at: expiresAt.toISOString() };
}

export interface InboxEnv extends AuthEnv {
  Variables: AuthEnv["Variables"] & { inboxOwner: InboxOwner };
}

const CHALLENGE = 'InboxToken realm="notify-inbox"';

/**
 * Why a request without X-Inbox-Token is refused, naming what it sent instead: these routes are
 * where a client holding the wrong credential (the backend's API key, or the token in the API
 * key's header) ends up first.
 */
function missingToken(c: Context): AppError {
  const authorization = c.req.header("authorization");
  const apiKeyHeader = c.req.header("x-api-key");
  const sent = authorization === undefined ? apiKeyHeader?.trim() : /^Bearer\s+(\S+)/i.exec(authorization)?.[1];
  const where = authorization === undefined ? "X-API-Key" : "Authorization";
  const mint = `the user's backend mints one with its API key: ${INBOX_TOKEN_ROUTE}`;
  let detail = `an inbox token is required in the X-Inbox-Token header; ${mint}`;
  if (sent !== undefined && isInboxToken(sent)) {
    detail = `the inbox token goes in the X-Inbox-Token header, not in ${where}`;
  } else if (authorization !== undefined || apiKeyHeader !== undefined) {
    detail = `this route takes a user's inbox token in the X-Inbox-Token header, not an API key; ${mint}`;
  }
  // RFC 6750 3.1: a request with no credential of this scheme gets a bare challenge.
  return new AppError("unauthenticated", detail, { context: { wwwAuthenticate: CHALLENGE } });
}

/**
 * The owner a valid, unexpired inbox token opens (one user, as seen by the client whose key
 * minted it, while that key works); every inbox query is confined to it. No API key is looked
 * at on these routes (`authenticate` leaves them alone). With `throttle`, an unknown or expired
 * token spends one of the source address's pre-auth attempts, and an address with none left is
 * answered 429 before any lookup.
 */
export function requireInboxToken(database: Database, throttle?: AttemptThrottle): MiddlewareHandler<InboxEnv> {
  return async (c, next) => {
    if (credentialInQuery(c)) {
      throw new AppError(
        "invalid_request",
        "an inbox token is not accepted in the URL; send it in the X-Inbox-Token header (URLs end up in logs)",
        { context: { wwwAuthenticate: `${CHALLENGE}, error="invalid_request"` } },
      );
    }
    const token = c.req.header(INBOX_TOKEN_HEADER)?.trim();
    if (!token) throw missingToken(c);
    const budget = throttle?.budget(clientAddress(c));
    budget?.check();
    const owner = await findInboxTokenOwner(database, hashKey(token));
    if (owner === null) {
      budget?.charge();
      throw new AppError("unauthenticated", "the inbox token is unknown, expired, or its key was revoked", {
        context: { wwwAuthenticate: `${CHALLENGE}, error="invalid_token"` },
      });
    }
    c.set("inboxOwner", owner);
    c.set("log", c.get("log").child({ user_id: owner.userId }));
    await next();
  };
}
