import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Credentials that carry a MAC under a deployment secret, so that a forged, mistyped or random
 * one is refused in microseconds, with no lookup and without spending anyone's budget: an API
 * key (`ntf_<secret>.<mac>`) and an inbox token (`ntu_<claims>.<mac>`, self-contained). A valid
 * MAC says only that this deployment minted the credential; whether it still works (not
 * revoked, not expired) is decided by the caller.
 */

/** The keys derived from the deployment secret, one per kind of credential. */
export interface CredentialKeys {
  readonly apiKey: Buffer;
  readonly inboxToken: Buffer;
}

/** Derives each kind's own key, so a MAC of one kind is never valid as another. */
export function credentialKeys(secret: string): CredentialKeys {
  const derive = (purpose: string) => createHmac("sha256", secret).update(purpose).digest();
  return { apiKey: derive("notify api key v2"), inboxToken: derive("notify inbox token v1") };
}

/** A fresh deployment secret: 32 random bytes, base64url. */
export const newDeploymentSecret = (): string => randomBytes(32).toString("base64url");

const mac = (key: Buffer, data: string, bytes: number) =>
  createHmac("sha256", key).update(data).digest().subarray(0, bytes);

/**
 * Compares the encoded MACs, not the decoded bytes: base64url's spare bits would otherwise let
 * several strings pass for one MAC.
 */
const macMatches = (key: Buffer, data: string, given: string, bytes: number): boolean => {
  const expected = Buffer.from(mac(key, data, bytes).toString("base64url"));
  const presented = Buffer.from(given);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
};

const API_KEY_MAC_BYTES = 16;
const SIGNED_KEY = /^(ntf_[A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{22})$/;

/** An API key with a MAC: `ntf_` + 32 random bytes + `.` + 16 bytes of HMAC-SHA256, base64url. */
export function generateSignedKey(keys: CredentialKeys): string {
  const body = `ntf_${randomBytes(32).toString("base64url")}`;
  return `${body}.${mac(keys.apiKey, body, API_KEY_MAC_BYTES).toString("base64url")}`;
}

/**
 * What a presented API key's form says: `signed` (its MAC is this deployment's), `forged` (it
 * has the signed form and a MAC that is not), or `unsigned` (a key without a MAC, `ntf_` and
 * random bytes only, or anything else: only a lookup can tell).
 */
export type KeyForm = "signed" | "forged" | "unsigned";

export function keyForm(keys: CredentialKeys, key: string): KeyForm {
  const match = SIGNED_KEY.exec(key);
  if (match === null) return "unsigned";
  return macMatches(keys.apiKey, match[1] as string, match[2] as string, API_KEY_MAC_BYTES) ? "signed" : "forged";
}

/** What an inbox token says of itself; its MAC makes every field the minting server's. */
export interface InboxTokenClaims {
  /** The token's own id: what `DELETE /users/{id}/inbox-tokens/{token_id}` names. */
  tokenId: string;
  userId: string;
  clientId: string;
  /** The API key that minted it: the token works only while that key does. */
  keyId: string;
  /** Unix seconds. */
  issuedAt: number;
  /** Unix seconds. */
  expiresAt: number;
}

const INBOX_TOKEN_MAC_BYTES = 32;
const SIGNED_TOKEN = /^(ntu_[A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{43})$/;

/** `ntu_` + base64url of the claims + `.` + HMAC-SHA256 over both, base64url. */
export function signInboxToken(keys: CredentialKeys, claims: InboxTokenClaims): string {
  const body = `ntu_${Buffer.from(
    JSON.stringify([
      1,
      claims.tokenId,
      claims.userId,
      claims.clientId,
      claims.keyId,
      claims.issuedAt,
      claims.expiresAt,
    ]),
  ).toString("base64url")}`;
  return `${body}.${mac(keys.inboxToken, body, INBOX_TOKEN_MAC_BYTES).toString("base64url")}`;
}

/**
 * The claims of a token this deployment signed; null for anything else (a forged, truncated
 * or foreign token, or an opaque one without a signature: `isSignedInboxToken` tells which).
 * Expiry and revocation are the caller's to check.
 */
export function verifyInboxToken(keys: CredentialKeys, token: string): InboxTokenClaims | null {
  const match = SIGNED_TOKEN.exec(token);
  if (match === null) return null;
  const body = match[1] as string;
  if (!macMatches(keys.inboxToken, body, match[2] as string, INBOX_TOKEN_MAC_BYTES)) return null;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(body.slice(4), "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (!Array.isArray(claims) || claims.length !== 7 || claims[0] !== 1) return null;
  const [, tokenId, userId, clientId, keyId, issuedAt, expiresAt] = claims;
  if (
    typeof tokenId !== "string" ||
    typeof userId !== "string" ||
    typeof clientId !== "string" ||
    typeof keyId !== "string" ||
    !Number.isSafeInteger(issuedAt) ||
    !Number.isSafeInteger(expiresAt)
  ) {
    return null;
  }
  return { tokenId, userId, clientId, keyId, issuedAt, expiresAt };
}

/** Whether a token has the signed form (then only `verifyInboxToken` decides it, never a lookup). */
export const isSignedInboxToken = (token: string): boolean => SIGNED_TOKEN.test(token);
