import {
  AppError,
  type BucketLimits,
  type CredentialKeys,
  hashKey,
  isAppError,
  isSignedInboxToken,
  newId,
  signInboxToken,
  verifyInboxToken,
} from "@notify/core";
import { type Database, findInboxTokenOwner, type InboxOwner, loadCredentialKeys } from "@notify/db";
import { type AttemptThrottle, clientAddress, promiseHeaders, toAppError } from "@notify/http";
import type { Context, MiddlewareHandler } from "hono";
import type { CachedKeyLookup } from "../auth/api-keys.js";
import { credentialInQuery, INBOX_TOKEN_HEADER, INBOX_TOKEN_ROUTE, isInboxToken } from "../auth/credentials.js";
import type { AuthEnv } from "../auth/middleware.js";
import { type Admitted, createRateLimiter, rateLimitHeaders } from "../auth/rate-limit.js";
import { type InboxRevocations, tokenIdIssuedMs } from "./revocations.js";
import type { InboxSettings } from "./settings.js";

export interface IssuedInboxToken {
  token: string;
  token_id: string;
  user_id: string;
  expires_at: string;
}

/**
 * A signed, self-contained token (libs/core credentials.ts): its id, the user, the client and
 * the minting key, issued now for `ttlSeconds`, under the deployment's MAC key. Nothing is stored.
 */
export function issueInboxToken(
  keys: CredentialKeys,
  input: { userId: string; clientId: string; keyId: string; ttlSeconds: number },
  now = Date.now(),
): IssuedInboxToken {
  const tokenId = newId();
  const issuedAt = Math.floor(now / 1000);
  const expiresAt = issuedAt + input.ttlSeconds;
  const token = signInboxToken(keys, {
    tokenId,
    userId: input.userId,
    clientId: input.clientId,
    keyId: input.keyId,
    issuedAt,
    expiresAt,
  });
  return { token, token_id: tokenId, user_id: input.userId, expires_at: new Date(expiresAt * 1000).toISOString() };
}

/**
 * When a signed token was issued, to the millisecond: its id is a UUIDv7, whose first 48 bits
 * are the time it was made (the claims' issued-at is in seconds, too coarse to tell a token
 * minted just after "revoke all" from one just before).
 */
export function tokenIssuedMs(tokenId: string, issuedAtSeconds: number): number {
  return tokenIdIssuedMs(tokenId) ?? issuedAtSeconds * 1000;
}

/** An inbox token that opened the request: whose inbox, and what an open stream checks again. */
export interface InboxCredential {
  owner: InboxOwner;
  /** What the token's rate limit and stream cap count by: its id, or an opaque token's hash. */
  tokenKey: string;
  /** Null for an opaque token (no signature, no claims), which has none. */
  tokenId: string | null;
  keyId: string;
  issuedMs: number;
  expiresMs: number;
}

export interface InboxEnv extends AuthEnv {
  Variables: AuthEnv["Variables"] & { inboxOwner: InboxOwner; inboxToken: InboxCredential };
}

const CHALLENGE = 'InboxToken realm="notify-inbox"';

/** An opaque token: `ntu_` + 32 random bytes, base64url, no signature. Only these are looked up. */
const OPAQUE_TOKEN = /^ntu_[A-Za-z0-9_-]{43}$/;

const invalidToken = (detail: string) =>
  new AppError("unauthenticated", detail, { context: { wwwAuthenticate: `${CHALLENGE}, error="invalid_token"` } });

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

/** Whether a credential no longer opens anything, and why (the 401's detail). */
export function credentialProblem(
  credential: InboxCredential,
  revocations: Pick<InboxRevocations, "covers">,
  now: number,
): "expired" | "revoked" | null {
  if (now >= credential.expiresMs) return "expired";
  const { owner, tokenId, issuedMs } = credential;
  if (revocations.covers({ clientId: owner.clientId, userId: owner.userId, tokenId, issuedMs })) return "revoked";
  return null;
}

const PROBLEM_DETAIL = {
  expired: "the inbox token has expired; the user's backend mints a new one",
  revoked: "the inbox token was revoked; the user's backend mints a new one",
  key_revoked: "the inbox token's key was revoked; the user's backend mints a new one with a working key",
} as const;

export interface InboxAuthDeps {
  /** The accept path's pool: the deployment's MAC keys are read from it once, shared with the key lookup. */
  database: Database;
  /** Where an opaque token is looked up. */
  inboxDatabase: Database;
  lookupKey: Pick<CachedKeyLookup, "active">;
  revocations: InboxRevocations;
  settings: Pick<InboxSettings, "tokenRate" | "userRate">;
  throttle?: AttemptThrottle | undefined;
}

/**
 * The owner a valid inbox token opens (one user, as seen by the client whose key minted it,
 * while that key works); every inbox query is confined to it. No API key is looked at on these
 * routes (`authenticate` leaves them alone).
 *
 * A signed token is decided without a lookup: its MAC, its expiry, the revocations held in
 * memory and whether its minting key is active (from the key cache). A forged or malformed one
 * spends one of the source address's pre-auth attempts and is refused at once; a valid one never
 * looks at the budget, so others' failures from the same address never refuse it. Only an
 * opaque token (no signature) is looked up in Postgres: its attempt is
 * reserved before the lookup (429 when the address has none left) and given back if it is valid.
 *
 * Then the token's and its user's leaky buckets (429 with Retry-After and the RateLimit headers).
 */
export function requireInboxToken(deps: InboxAuthDeps): MiddlewareHandler<InboxEnv> {
  const { revocations, throttle } = deps;
  let keys: CredentialKeys | undefined;
  const keysReady = () =>
    loadCredentialKeys(deps.database).then((loaded) => {
      keys = loaded;
      return loaded;
    });
  // Read now, so the first request does not wait for it (a failure is retried by the next one).
  keysReady().catch(() => {});
  const limiters = {
    token: createRateLimiter(deps.settings.tokenRate),
    user: createRateLimiter(deps.settings.userRate),
  };

  const signed = async (c: Context, token: string): Promise<InboxCredential> => {
    const macKeys = keys ?? (await keysReady().catch(dependency));
    const claims = verifyInboxToken(macKeys, token);
    if (claims === null) {
      throttle?.budget(clientAddress(c)).charge();
      throw invalidToken("the inbox token is not one this service issued");
    }
    const credential: InboxCredential = {
      owner: { userId: claims.userId, clientId: claims.clientId },
      tokenKey: claims.tokenId,
      tokenId: claims.tokenId,
      keyId: claims.keyId,
      issuedMs: tokenIssuedMs(claims.tokenId, claims.issuedAt),
      expiresMs: claims.expiresAt * 1000,
    };
    if (!revocations.isLoaded()) await revocations.whenLoaded().catch(dependency);
    const problem = credentialProblem(credential, revocations, Date.now());
    if (problem !== null) throw invalidToken(PROBLEM_DETAIL[problem]);
    const active = deps.lookupKey.active(claims.keyId);
    if (!(active instanceof Promise ? await active.catch(dependency) : active)) {
      throw invalidToken(PROBLEM_DETAIL.key_revoked);
    }
    return credential;
  };

  const opaque = async (c: Context, token: string): Promise<InboxCredential> => {
    const budget = throttle?.budget(clientAddress(c));
    if (!OPAQUE_TOKEN.test(token)) {
      budget?.charge();
      throw invalidToken("the inbox token is not one this service issued");
    }
    // A random token and a valid one look alike until Postgres answers: the attempt is reserved
    // first, so parallel guesses cannot overdraw the budget, and given back if the token is valid.
    budget?.check();
    budget?.charge();
    const hash = hashKey(token);
    const stored = await findInboxTokenOwner(deps.inboxDatabase, hash).catch(dependency);
    if (stored === null) throw invalidToken("the inbox token is unknown, expired, or its key was revoked");
    budget?.refund();
    const credential: InboxCredential = {
      owner: { userId: stored.userId, clientId: stored.clientId },
      tokenKey: hash,
      tokenId: null,
      keyId: stored.keyId,
      issuedMs: stored.createdAt.getTime(),
      expiresMs: stored.expiresAt.getTime(),
    };
    if (!revocations.isLoaded()) await revocations.whenLoaded().catch(dependency);
    if (credentialProblem(credential, revocations, Date.now()) === "revoked") {
      throw invalidToken(PROBLEM_DETAIL.revoked);
    }
    return credential;
  };

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
    const credential = isSignedInboxToken(token) ? await signed(c, token) : await opaque(c, token);
    const decision = await admit(limiters, deps.settings, credential);
    c.set("inboxToken", credential);
    c.set("inboxOwner", credential.owner);
    c.set("log", c.get("log").child({ user_id: credential.owner.userId, client_id: credential.owner.clientId }));
    promiseHeaders(c, rateLimitHeaders(decision, decision.limits));
    await next();
  };
}

const dependency = (error: unknown): never => {
  throw toAppError(error);
};

type Limiter = ReturnType<typeof createRateLimiter>;

/**
 * Both buckets admit the request at once (a wait in the token's queue does not hide the user's);
 * answers the tighter decision, whose headers go on the answer. A refusal names the inbox limit
 * it met, not an API key's.
 */
async function admit(
  limiters: { token: Limiter; user: Limiter },
  settings: Pick<InboxSettings, "tokenRate" | "userRate">,
  credential: InboxCredential,
): Promise<Admitted> {
  const one = (limiter: Limiter, key: string, limits: BucketLimits, what: string) => {
    try {
      return limiter.admit(key, null);
    } catch (error) {
      if (!isAppError(error) || error.code !== "rate_limited") throw error;
      throw new AppError(
        "rate_limited",
        `each inbox ${what} may make ${limits.perSecond} requests per second with a queue of ${limits.burst}`,
        { context: error.context },
      );
    }
  };
  const { owner } = credential;
  const byToken = one(limiters.token, credential.tokenKey, settings.tokenRate, "token");
  const byUser = one(limiters.user, `${owner.clientId}\n${owner.userId}`, settings.userRate, "user");
  const [token, user] = [
    byToken instanceof Promise ? await byToken : byToken,
    byUser instanceof Promise ? await byUser : byUser,
  ];
  return user.remaining < token.remaining ? user : token;
}
