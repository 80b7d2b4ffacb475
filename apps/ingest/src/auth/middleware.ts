import type { Scope } from "@notify/core";
import { AppError } from "@notify/core";
import type { AppEnv } from "@notify/http";
import type { MiddlewareHandler } from "hono";
import { asDependencyError } from "../dependency.js";
import { hasScope, type Principal } from "./api-keys.js";

export interface AuthEnv extends AppEnv {
  Variables: AppEnv["Variables"] & { principal: Principal };
}

const REALM = 'Bearer realm="notify"';
/** Query parameters that would carry a credential: refused, because URLs end up in logs. */
const CREDENTIAL_PARAMS = ["api_key", "apikey", "api-key", "key", "token", "access_token", "x-api-key"];

/**
 * API-key authentication (spec: Authentication; RFC 6750 for the challenges): the key comes in
 * X-API-Key or Authorization: Bearer, never in the query string and never in both headers.
 */
export function requireKey(
  lookup: (key: string) => Promise<Principal | null>,
  scope: Scope,
): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const query = new URL(c.req.url).searchParams;
    if (CREDENTIAL_PARAMS.some((name) => query.has(name))) {
      throw new AppError(
        "invalid_request",
        "API keys are not accepted in the query string; send X-API-Key or Authorization: Bearer",
        {
          context: { wwwAuthenticate: `${REALM}, error="invalid_request"` },
        },
      );
    }
    const header = c.req.header("x-api-key");
    const authorization = c.req.header("authorization");
    if (header !== undefined && authorization !== undefined) {
      throw new AppError("invalid_request", "send the API key in one header only", {
        context: { wwwAuthenticate: `${REALM}, error="invalid_request"` },
      });
    }
    let key = header?.trim();
    if (authorization !== undefined) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (!match) {
        throw new AppError("invalid_api_key", "Authorization must use the Bearer scheme", {
          context: { wwwAuthenticate: `${REALM}, error="invalid_token"` },
        });
      }
      key = match[1];
    }
    if (!key) {
      throw new AppError("unauthenticated", "an API key is required (X-API-Key or Authorization: Bearer)", {
        context: { wwwAuthenticate: REALM },
      });
    }
    const principal = await lookup(key).catch((error: unknown) => {
      throw asDependencyError(error, "postgres");
    });
    if (!principal) {
      throw new AppError("invalid_api_key", "the API key is unknown or revoked", {
        context: { wwwAuthenticate: `${REALM}, error="invalid_token"` },
      });
    }
    if (!hasScope(principal, scope)) {
      throw new AppError("insufficient_scope", `this operation needs the "${scope}" scope`, {
        context: { wwwAuthenticate: `${REALM}, error="insufficient_scope", scope="${scope}"` },
      });
    }
    c.set("principal", principal);
    c.set("log", c.var.log.child({ client_id: principal.clientId, key_id: principal.keyId }));
    await next();
  };
}
