import { createHash } from "node:crypto";
import { AppError, type UnsubscribeClaims, verifyUnsubscribeToken } from "@notify/core";
import { loadUnsubscribeKey, optOutCategory } from "@notify/db";
import { type AppEnv, clientAddress, toAppError } from "@notify/http";
import type { Context, Hono } from "hono";
import type { IngestDeps } from "../deps.js";
import { spreadProfileChange } from "./announce.js";

/** Where the links in email point: `<UNSUBSCRIBE_BASE_URL>/u/{token}`, outside the versioned API. */
export const UNSUBSCRIBE_PATH = "/u/:token";

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const STYLE =
  "body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1a1a1a}" +
  "button{font:inherit;padding:.5rem 1.25rem;border:1px solid #1a1a1a;border-radius:4px;background:#fff;cursor:pointer}" +
  "button:focus-visible{outline:3px solid #2563eb;outline-offset:2px}";

/**
 * No script, no outside resource, no framing; the one style block by its hash; the form may post
 * only back here. The token is in the URL: no Referer takes it elsewhere, and nothing caches it.
 */
const PAGE_HEADERS: Record<string, string> = {
  "content-security-policy": `default-src 'none'; style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
};

const page = (title: string, body: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;

const html = (c: Context, status: 200 | 404, title: string, body: string) =>
  c.html(page(title, body), status, PAGE_HEADERS);

const NOT_VALID = "this unsubscribe link is not valid";

/**
 * One-click unsubscribe (RFC 8058), with no API key: the link's token is its own authority, a
 * MAC over (client, user, category) checked without a lookup. GET shows a page whose button
 * posts back and never changes anything (link scanners and prefetchers follow GETs); POST
 * (what a mail client sends, `List-Unsubscribe=One-Click`, or the page's form) opts the user out
 * of the category. The body is not read: the token says everything, and mail clients differ in
 * what they send.
 *
 * Category opt-outs are a user's, not a client's (user_preferences has no client column): the
 * opt-out holds for every client, and the token's client is logged with it. A token that does not verify is
 * a 404, the same for every reason, writes nothing, and spends one of the address's pre-auth
 * attempts.
 */
export function mountUnsubscribe(
  app: Hono<AppEnv>,
  deps: Pick<IngestDeps, "database" | "bus" | "preauthThrottle">,
): void {
  let key: Buffer | undefined;
  const keyReady = () =>
    loadUnsubscribeKey(deps.database).then((loaded) => {
      key = loaded;
      return loaded;
    });
  // Read now, so the first request does not wait for it (a failure is retried by the next one).
  keyReady().catch(() => {});

  const claimsOf = async (c: Context<AppEnv>): Promise<UnsubscribeClaims | null> => {
    const macKey =
      key ??
      (await keyReady().catch((error: unknown) => {
        throw toAppError(error);
      }));
    const claims = verifyUnsubscribeToken(macKey, c.req.param("token") ?? "");
    if (claims === null) deps.preauthThrottle?.budget(clientAddress(c)).charge();
    return claims;
  };

  const refused = (c: Context<AppEnv>) => {
    // A browser gets a page; anything else (a mail client's POST) the API's problem.
    if (/\btext\/html\b/.test(c.req.header("accept") ?? "")) {
      return html(c, 404, "Link not valid", `<p>This unsubscribe link is not valid. Nothing was changed.</p>`);
    }
    throw new AppError("not_found", NOT_VALID);
  };

  app.get(UNSUBSCRIBE_PATH, async (c) => {
    const claims = await claimsOf(c);
    if (claims === null) return refused(c);
    const category = escapeHtml(claims.category);
    return html(
      c,
      200,
      "Unsubscribe",
      `<p>Stop receiving <strong>${category}</strong> emails?</p><form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe from ${category}</button></form>`,
    );
  });

  app.post(UNSUBSCRIBE_PATH, async (c) => {
    const claims = await claimsOf(c);
    if (claims === null) return refused(c);
    const added = await optOutCategory(deps.database, claims.userId, claims.category).catch((error: unknown) => {
      throw toAppError(error);
    });
    if (added) {
      c.get("log").info(
        { client_id: claims.clientId, category: claims.category },
        "a user unsubscribed from a category by one-click link",
      );
      await spreadProfileChange(c.get("log"), deps.bus, claims.userId);
    }
    const category = escapeHtml(claims.category);
    return html(c, 200, "Unsubscribed", `<p>You will no longer receive <strong>${category}</strong> emails.</p>`);
  });
}
