import { randomBytes } from "node:crypto";
import { AppError, hashKey } from "@notify/core";
import type { Database } from "@notify/db";
import type { MiddlewareHandler } from "hono";
import type { AuthEnv } from "../auth/middleware.js";

/** The header a user's client sends its inbox token in (Authorization carries API keys). */
export const INBOX_TOKEN_HEADER = "x-inbox-token";

export interface IssuedInboxToken {
  token: string;
  user_id: string;
  expires_at: string;
}

/** Opaque and random like API keys (`ntu_` + 256 bits); only the SHA-256 is stored. */
export async function issueInboxToken(
  database: Database,
  input: { userId: string; clientId: string; ttlSeconds: number },
): Promise<IssuedInboxToken> {
  const token = `ntu_${randomBytes(32).toString("base64url")}`;
  const expiresAt = new Date(Date.now() + input.ttlSeconds * 1000);
  await database.sql`insert into inbox_tokens (token_hash, user_id, client_id, expires_at)
    values (${hashKey(token)}, ${input.userId}, ${input.clientId}, ${expiresAt})`;
  return { token, user_id: input.userId, expires_at: expiresAt.toISOString() };
}

export interface InboxEnv extends AuthEnv {
  Variables: AuthEnv["Variables"] & { inboxUser: string };
}

const CHALLENGE = 'InboxToken realm="notify-inbox"';

/** The user a valid, unexpired inbox token names; every inbox query is confined to that user. */
export function requireInboxToken(database: Database): MiddlewareHandler<InboxEnv> {
  return async (c, next) => {
    const token = c.req.header(INBOX_TOKEN_HEADER)?.trim();
    if (!token) {
      throw new AppError("unauthenticated", "an inbox token is required (X-Inbox-Token)", {
        context: { wwwAuthenticate: CHALLENGE },
      });
    }
    const [row] = await database.sql<{ user_id: string }[]>`
      select user_id from inbox_tokens where token_hash = ${hashKey(token)} and expires_at > now()`;
    if (row === undefined) {
      throw new AppError("unauthenticated", "the inbox token is unknown or expired", {
        context: { wwwAuthenticate: `${CHALLENGE}, error="invalid_token"` },
      });
    }
    c.set("inboxUser", row.user_id);
    c.set("log", c.get("log").child({ user_id: row.user_id }));
    await next();
  };
}
