import { createHmac, timingSafeEqual } from "node:crypto";
import type { Priority } from "./channels.js";
import { CATEGORY_PATTERN } from "./preferences.js";

/**
 * One-click unsubscribe links (RFC 8058): each qualifying email carries a link whose token names
 * the client, the user and the category, with a MAC under the deployment's `unsubscribe` secret.
 * The token never expires (a link in an old email must keep working) and is checked without a
 * lookup, so a guessed or altered one costs nothing and writes nothing.
 */

/** What an unsubscribe token says; its MAC makes every field the minting deployment's. */
export interface UnsubscribeClaims {
  clientId: string;
  userId: string;
  category: string;
}

/** The key of the token MACs, derived from the deployment's `unsubscribe` secret. */
export const unsubscribeKey = (secret: string): Buffer =>
  createHmac("sha256", secret).update("notify unsubscribe link v1").digest();

// 128 bits: enough that a forgery is out of reach, short enough for a URL in a mail header.
const MAC_BYTES = 16;
const TOKEN = /^([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{22})$/;

const macOf = (key: Buffer, body: string): string =>
  createHmac("sha256", key).update(body).digest().subarray(0, MAC_BYTES).toString("base64url");

/** base64url of the claims + `.` + the first 16 bytes of HMAC-SHA256 over that text, base64url. */
export function signUnsubscribeToken(key: Buffer, claims: UnsubscribeClaims): string {
  const body = Buffer.from(JSON.stringify([1, claims.clientId, claims.userId, claims.category])).toString("base64url");
  return `${body}.${macOf(key, body)}`;
}

/**
 * The claims of a token this deployment minted; null for anything else, whatever is wrong with
 * it (so a caller answers every refusal alike). The MAC is compared in constant time, on its
 * encoded form: base64url's spare bits would otherwise let several strings pass for one MAC.
 */
export function verifyUnsubscribeToken(key: Buffer, token: string): UnsubscribeClaims | null {
  const match = TOKEN.exec(token);
  if (match === null) return null;
  const body = match[1] as string;
  const expected = Buffer.from(macOf(key, body));
  const presented = Buffer.from(match[2] as string);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return null;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (!Array.isArray(claims) || claims.length !== 4 || claims[0] !== 1) return null;
  const [, clientId, userId, category] = claims;
  if (typeof clientId !== "string" || typeof userId !== "string" || userId === "") return null;
  if (typeof category !== "string" || !CATEGORY_PATTERN.test(category)) return null;
  return { clientId, userId, category };
}

/** Where unsubscribe links point and which emails carry them (UNSUBSCRIBE_* settings). */
export interface UnsubscribeSettings {
  /** The public origin of ingest (with a path prefix, if it has one): links are `<baseUrl>/u/<token>`. */
  baseUrl: string;
  /** An address that also takes unsubscribe requests by email, offered as a second choice. */
  mailto?: string | undefined;
  /** Categories whose emails carry the header whatever their priority. */
  categories: readonly string[];
  /**
   * Categories no preference suppresses (CRITICAL_CATEGORIES): routing ignores an opt-out of
   * them, so their email carries no header unless `categories` lists the category.
   */
  criticalCategories: readonly string[];
}

/** What of an email decides its unsubscribe header (a work item's fields). */
export interface UnsubscribableEmail {
  client_id?: string | undefined;
  user_id: string;
  category: string;
  priority: Priority;
}

/**
 * Promotional email carries the header; transactional email (receipts, passcodes) only when its
 * category is listed, since a user must not be able to turn off what they need. Neither does
 * email of a critical category, promotional or not, unless its category is listed: routing sends
 * it whatever the user's opt-outs, so the link would promise what it cannot do.
 */
export const offersUnsubscribe = (
  settings: Pick<UnsubscribeSettings, "categories" | "criticalCategories">,
  email: UnsubscribableEmail,
) =>
  settings.categories.includes(email.category) ||
  (email.priority === "promotional" && !settings.criticalCategories.includes(email.category));

/**
 * The List-Unsubscribe and List-Unsubscribe-Post headers of an email (RFC 2369, RFC 8058), or
 * null when it gets none: it does not qualify, or its work item does not name its client (one
 * queued before work items carried it).
 */
export function listUnsubscribeHeaders(
  key: Buffer,
  settings: UnsubscribeSettings,
  email: UnsubscribableEmail,
): Record<string, string> | null {
  if (email.client_id === undefined || !offersUnsubscribe(settings, email)) return null;
  const token = signUnsubscribeToken(key, {
    clientId: email.client_id,
    userId: email.user_id,
    category: email.category,
  });
  const links = [`<${settings.baseUrl.replace(/\/+$/, "")}/u/${token}>`];
  // The token in the subject lets whoever reads that mailbox act on the request.
  if (settings.mailto) links.push(`<mailto:${settings.mailto}?subject=unsubscribe%20${token}>`);
  return { "List-Unsubscribe": links.join(", "), "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" };
}
