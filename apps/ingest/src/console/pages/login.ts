import { AppError } from "@notify/core";
import { clientAddress } from "@notify/http";
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { html } from "hono/html";
import { apiClient, KeyRefused } from "../api.js";
import type { ConsoleOptions } from "../context.js";
import { field, formOf } from "../context.js";
import { loginPage, problemText } from "../layout.js";
import { SESSION_COOKIE, type SessionStore } from "../session.js";

function form(message?: string): ReturnType<typeof loginPage> {
  return loginPage(html`<h1>notify console</h1>
${message === undefined ? "" : html`<p class="error" data-testid="error" role="alert">${message}</p>`}
<form method="post" action="/console/login" data-testid="login-form">
<label>Admin API key
<input type="password" name="key" autocomplete="off" autofocus required data-testid="login-key"></label>
<button type="submit" data-testid="login-submit">Sign in</button>
</form>
<p class="muted">Any key with the admin scope (npx notify keys create --scopes admin). It stays on this server, in memory, for this session only.</p>`);
}

const cookieOptions = (c: Context) => ({
  path: "/console",
  httpOnly: true,
  sameSite: "Strict" as const,
  // Only over HTTPS: the operator's port is plain HTTP on loopback by default.
  secure: new URL(c.req.url).protocol === "https:",
});

export function loginRoutes(options: ConsoleOptions, sessions: SessionStore) {
  return {
    /** GET /console/login: the form, or straight on when already signed in. */
    show: (c: Context) => {
      if (sessions.get(getCookie(c, SESSION_COOKIE)) !== undefined) return c.redirect("/console", 303);
      return c.html(form());
    },

    /**
     * POST /console/login: the key is checked by the API itself (a route needing `admin`). A
     * refused key spends the address's pre-auth attempts, as an unknown key does on the API's
     * port, so the console is no faster way to guess keys; with none left the answer is 429
     * before any lookup.
     */
    submit: async (c: Context) => {
      const key = field(await formOf(c), "key").trim();
      const budget = options.preauthThrottle.budget(clientAddress(c));
      try {
        budget.check();
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        const seconds = error.context?.retryAfterSeconds;
        if (typeof seconds === "number") c.header("retry-after", String(seconds));
        return c.html(form("Too many failed sign-ins from this address; wait and try again."), 429);
      }
      if (key === "") return c.html(form("Enter an admin API key."), 400);
      // The attempt is spent before the key is checked (with no wait between the check and the
      // spending), and given back only if the key is good: sign-ins sent in parallel cannot all
      // pass the check before the first of them fails.
      budget.charge();
      try {
        const checked = await apiClient(options.api, key, c.get("requestId")).get("/keys", { page_size: "1" });
        budget.refund();
        if (!checked.ok) {
          return c.html(form(problemText(checked.problem)), checked.problem.status === 429 ? 429 : 503);
        }
      } catch (error) {
        if (!(error instanceof KeyRefused)) {
          budget.refund();
          throw error;
        }
        const refused =
          error.problem.status === 403
            ? "This key lacks the admin scope; the console needs an admin key."
            : "This key is unknown or revoked.";
        return c.html(form(refused), error.problem.status === 403 ? 403 : 401);
      }
      // A sign-in over a live session replaces it: the old id is not left open beside the new one.
      sessions.end(getCookie(c, SESSION_COOKIE));
      const { id } = sessions.create(key);
      setCookie(c, SESSION_COOKIE, id, cookieOptions(c));
      return c.redirect("/console", 303);
    },

    /** POST /console/logout (the CSRF token was checked like on every POST): the session ends here and in the browser. */
    logout: (c: Context) => {
      sessions.end(getCookie(c, SESSION_COOKIE));
      deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
      return c.redirect("/console/login", 303);
    },
  };
}

/** After the API refused a session's key: the session is over, and the sign-in form says why. */
export async function signedOut(
  c: Context,
  sessions: SessionStore,
  message: string,
  status: 401 | 403,
): Promise<Response> {
  sessions.end(getCookie(c, SESSION_COOKIE));
  deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
  return c.html(form(message), status);
}
