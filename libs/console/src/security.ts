import { isIPv4, isIPv6 } from "node:net";
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

/**
 * Whether an interface is this machine's own: 127.0.0.0/8, ::1 (and 127.x mapped into IPv6) or
 * localhost. Only there does nothing between a browser and the console cross a network.
 */
export function isLoopbackHost(host: string): boolean {
  const name = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1");
  if (name === "localhost") return true;
  if (isIPv4(name)) return name.startsWith("127.");
  if (!isIPv6(name)) return false;
  // The URL parser writes an IPv6 address one way: ::1, and ::ffff:7f00:1 for ::ffff:127.0.0.1.
  const canonical = new URL(`http://[${name}]/`).hostname.slice(1, -1);
  return canonical === "::1" || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(canonical);
}

/**
 * Why the console is off on this interface, or undefined when it may be served: its sign-in
 * form carries an operator key and its cookie a session, so it is served only on loopback, or
 * where a TLS proxy in front of the operator's port serves it to browsers over https
 * (CONSOLE_TLS).
 */
export function consoleRefusal(settings: { host: string; tls: boolean }): string | undefined {
  if (settings.tls || isLoopbackHost(settings.host)) return undefined;
  return (
    `the console is off: ADMIN_HOST ${settings.host} is not a loopback address and CONSOLE_TLS is not set, ` +
    "so operator keys and session cookies would cross the network in the clear. Serve the operator's port " +
    "through a TLS proxy and set CONSOLE_TLS=true, or set ADMIN_HOST=127.0.0.1 (and reach it through an SSH " +
    "tunnel); CONSOLE_ENABLED=false turns it off without this warning"
  );
}
