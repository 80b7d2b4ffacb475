import { responseHeaders } from "@notify/http";
import type { Context, MiddlewareHandler } from "hono";

/**
 * On every console answer, errors included. No script may run at all (the console has none),
 * styles come only from /console/console.css, forms post only here, and no page may be framed
 * (clickjacking); nothing is cached, since pages show personal data, and no Referer leaves.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

export const securityHeaders: MiddlewareHandler = (c, next) => responseHeaders(c, next, SECURITY_HEADERS);

/** Methods that change nothing: no CSRF token or origin check for them. */
export const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Whether a state-changing request comes from somewhere else. A browser's Sec-Fetch-Site
 * decides when it is sent (browsers set it; no page can): only same-origin (or none: the user's
 * own navigation) passes. Without it, an Origin naming another host, or `null`, is refused.
 * The Origin alone cannot decide for a browser: under this console's Referrer-Policy
 * no-referrer, Chromium sends `Origin: null` with its own same-origin form posts. A request
 * with neither header (curl, a script) is not refused here: it carries no ambient credential a
 * third site could borrow, or the CSRF token decides.
 */
export function crossOrigin(c: Context): boolean {
  if (SAFE_METHODS.has(c.req.method)) return false;
  const site = c.req.header("sec-fetch-site");
  if (site !== undefined) return site !== "same-origin" && site !== "none";
  const origin = c.req.header("origin");
  if (origin === undefined) return false;
  // The host the browser addressed, compared without the scheme: a TLS proxy in front of the
  // operator's port makes the browser's origin https while this server sees http.
  const host = c.req.header("host") ?? new URL(c.req.url).host;
  try {
    return new URL(origin).host !== host;
  } catch {
    return true; // "null" (a sandboxed or privacy-sensitive context) or garbage
  }
}
