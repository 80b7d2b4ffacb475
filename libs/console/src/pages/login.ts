import { AppError } from "@notify/core";
import { clientAddress } from "@notify/http";
import type { Context } from "hono";
import { html } from "hono/html";
import { apiClient, KeyRefused } from "../api.js";
import type { ConsoleOptions } from "../context.js";
import { field, formOf } from "../context.js";
import { loginPage, problemText } from "../layout.js";
import type { SessionCookie, SessionStore } from "../session.js";

function form(message?: string): ReturnType<typeof loginPage> {
  return loginPage(html`<h1>notify console</h1>
${message === undefined ? "" : html`<p class="error" data-testid="error" role="alert">${message}</p>`}
<form method="post" action="/console/login" data-testid="login-form">
<label>Operator key
<input type="password" name="key" autocomplete="off" autofocus required data-testid="login-key"></label>
<button type="submit" data-testid="login-submit">Sign in</button>
</form>
<p class="muted">Any API key with the operator scope (npx notify keys create --name NAME --client CLIENT --scope operator). It stays on this server, in memory, for this session only.</p>`);
}

/**
 * The sign-in's check of a key: an operator-only route that costs one lookup by primary key
 * (a notification id no notification has), so only a key the API lets read every client's
 * notifications opens the console.
 */
const OPERATOR_CHECK = { path: "/ops/notifications", query: { notification_id: "console-sign-in", limit: "1" } };

export function loginRoutes(options: ConsoleOptions, sessions: SessionStore, cookie: SessionCookie) {
  return {
    /** GET /console/login: the form, or straight on when already signed in. */
    show: (c: Context) => {
      if (sessions.get(cookie.read(c)) !== undefined) return c.redirect("/console", 303);
      return c.html(form());
    },

    /**
     * POST /console/login: the key is checked by the API itself (a route needing `operator`). A
     * refused key spends the address's pre-auth attempts, as an unknown key does on the API's
     * port, so the console is no faster way to guess keys; with none left the answer is 429
     * before any lookup, except for a key the API vouches for without one (options.vouches).
     */
    submit: async (c: Context) => {
      const key = field(await formOf(c), "key").trim();
      const budget = options.preauthThrottle.budget(clientAddress(c));
      // A key the API can vouch for without a lookup is never held back by others' failures.
      const vouched = key !== "" && (options.vouches?.(key) ?? false);
      try {
        if (!vouched) budget.check();
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        const seconds = error.context?.retryAfterSeconds;
        if (typeof seconds === "number") c.header("retry-after", String(seconds));
        return c.html(form("Too many failed sign-ins from this address; wait and try again."), 429);
      }
      if (key === "") return c.html(form("Enter an operator key."), 400);
      // The attempt is spent before the key is checked (with no wait between the check and the
      // spending), and given back only if the key is good: sign-ins sent in parallel cannot all
      // pass the check before the first of them fails.
      if (!vouched) budget.charge();
      try {
        const checked = await apiClient(options.api, key, c.get("requestId")).get(
          OPERATOR_CHECK.path,
          OPERATOR_CHECK.query,
        );
        if (!vouched) budget.refund();
        if (!checked.ok) {
          return c.html(form(problemText(checked.problem)), checked.problem.status === 429 ? 429 : 503);
        }
      } catch (error) {
        if (!(error instanceof KeyRefused)) {
          if (!vouched) budget.refund();
          throw error;
        }
        if (vouched && error.problem.status === 401) budget.charge();
        const refused =
          error.problem.status === 403
            ? "This key lacks the operator scope; the console needs an operator key."
            : "This key is unknown or revoked.";
        return c.html(form(refused), error.problem.status === 403 ? 403 : 401);
      }
      // A sign-in over a live session replaces it: the old id is not left open beside the new one.
      sessions.end(cookie.read(c));
      const { id } = sessions.create(key);
      cookie.write(c, id);
      return c.redirect("/console", 303);
    },

    /** POST /console/logout (the CSRF token was checked like on every POST): the session ends here and in the browser. */
    logout: (c: Context) => {
      sessions.end(cookie.read(c));
      cookie.clear(c);
      return c.redirect("/console/login", 303);
    },
  };
}

/** After the API refused a session's key: the session is over, and the sign-in form says why. */
export async function signedOut(
  c: Context,
  sessions: SessionStore,
  cookie: SessionCookie,
  message: string,
  status: 401 | 403,
): Promise<Response> {
  sessions.end(cookie.read(c));
  cookie.clear(c);
  return c.html(form(message), status);
}
