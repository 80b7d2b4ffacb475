import type { Scope } from "@notify/core";
import { AppError } from "@notify/core";
import { type AppEnv, type AttemptThrottle, clientAddress, promiseHeaders, toAppError } from "@notify/http";
import type { Context, MiddlewareHandler } from "hono";
import { hasScope, type KeyLookup, type Principal } from "./api-keys.js";
import { credentialInQuery, INBOX_TOKEN_HEADER, isInboxToken } from "./credentials.js";
import { type RateLimiter, rateLimitHeaders } from "./rate-limit.js";

export interface AuthEnv extends AppEnv {
  Variables: AppEnv["Variables"] & { principal: Principal };
}

const REALM = 'Bearer realm="notify"';

const challenge = (error?: string, extra = "") => (error ? `${REALM}, error="${error}"${extra}` : REALM);

/**
 * The presented API key (RFC 6750 for the challenges): in X-API-Key or
 * Authorization: Bearer, never in the query string and never in both headers. Undefined when
 * the request carries none.
 */
function presentedKey(c: Context): string | undefined {
  if (credentialInQuery(c)) {
    throw new AppError(
      "invalid_request",
      "API keys are not accepted in the query string; send X-API-Key or Authorization: Bearer",
      {
        context: { wwwAuthenticate: challenge("invalid_request") },
      },
    );
  }
  const header = c.req.header("x-api-key");
  const authorization = c.req.header("authorization");
  if (header !== undefined && authorization !== undefined) {
    throw new AppError("invalid_request", "send the API key in one header only", {
      context: { wwwAuthenticate: challenge("invalid_request") },
    });
  }
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match) {
      throw new AppError("invalid_api_key", "Authorization must use the Bearer scheme", {
        context: { wwwAuthenticate: challenge("invalid_token") },
      });
    }
    return match[1];
  }
  return header?.trim() || undefined;
}

const API_KEY_WANTED = "this route needs an API key (X-API-Key or Authorization: Bearer)";

/**
 * Runs on every /api/v1 request but the ones `inboxTokenRoutes` names (they take a user's inbox
 * token instead and answer an API key themselves): identifies the client when a key is
 * presented, refuses an unknown or revoked one, and applies the key's leaky bucket (429 with
 * Retry-After and the RateLimit headers). Routes then state the scope they need in their contract
 * (routes/contract.ts), which checks it with `requireScope`.
 *
 * Before that, `throttle` guards the lookups that cannot be decided locally, per source address
 * (see KeyLookup): such a key is looked up only while the address has pre-auth attempts left
 * (429 otherwise, without a query), and an unknown or revoked one spends one. A key that
 * validates never spends one and is never refused for them.
 */
export function authenticate(
  lookup: KeyLookup,
  limiter: RateLimiter,
  inboxTokenRoutes: (path: string) => boolean = () => false,
  throttle?: AttemptThrottle,
): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    if (inboxTokenRoutes(c.req.path)) return next();
    const key = presentedKey(c);
    if (key === undefined) return next();
    if (isInboxToken(key)) {
      throw new AppError(
        "invalid_api_key",
        `the credential sent is an inbox token, which opens only the /api/v1/inbox routes (in X-Inbox-Token); ${API_KEY_WANTED}`,
        { context: { wwwAuthenticate: challenge("invalid_token") } },
      );
    }
    const budget = throttle?.budget(clientAddress(c));
    const found = lookup(key, budget);
    const principal =
      found instanceof Promise
        ? await found.catch((error: unknown) => {
            throw toAppError(error);
          })
        : found;
    if (!principal) {
      throw new AppError("invalid_api_key", "the API key is unknown or revoked", {
        context: { wwwAuthenticate: challenge("invalid_token") },
      });
    }
    const admitted = limiter.admit(principal.keyId, principal.rateLimit);
    const decision = admitted instanceof Promise ? await admitted : admitted;
    c.set("principal", principal);
    c.set("log", c.get("log").child({ client_id: principal.clientId, key_id: principal.keyId }));
    promiseHeaders(c, rateLimitHeaders(decision, decision.limits));
    await next();
  };
}

/**
 * A route's scope requirement. The key was identified by `authenticate`; without one the
 * answer is 401 with a bare challenge, with a key lacking the scope 403.
 */
export function requireScope(scope: Scope): MiddlewareHandler<AuthEnv> {
  return (c, next) => {
    const principal = c.get("principal") as Principal | undefined;
    if (!principal) {
      // RFC 6750 3.1: a request with no credential of this scheme gets a bare challenge.
      const detail =
        c.req.header(INBOX_TOKEN_HEADER) === undefined
          ? "an API key is required (X-API-Key or Authorization: Bearer)"
          : `${API_KEY_WANTED}; an inbox token (X-Inbox-Token) opens only the /api/v1/inbox routes`;
      throw new AppError("unauthenticated", detail, { context: { wwwAuthenticate: challenge() } });
    }
    if (!hasScope(principal, scope)) {
      throw new AppError("insufficient_scope", `this operation needs the "${scope}" scope`, {
        context: { wwwAuthenticate: challenge("insufficient_scope", `, scope="${scope}"`) },
      });
    }
    return next();
  };
}
