import { AppError } from "@notify/core";
import { type AppEnv, clientAddress } from "@notify/http";
import { Hono, type Hono as HonoApp, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { html } from "hono/html";
import { apiClient, KeyRefused } from "./api.js";
import {
  type ConsoleContext,
  type ConsoleEnv,
  type ConsoleOptions,
  field,
  formOf,
  type PageStatus,
  render,
} from "./context.js";
import { broadcastAction, broadcastsPage } from "./pages/broadcasts.js";
import { deadLetterPage, deadLettersPage, replayAction, replayedPage } from "./pages/dead-letters.js";
import { loginRoutes, signedOut } from "./pages/login.js";
import { notificationPage } from "./pages/notification.js";
import { overviewPage } from "./pages/overview.js";
import { providersPage } from "./pages/providers.js";
import { searchPage } from "./pages/search.js";
import { streamsPage } from "./pages/streams.js";
import { suppressionAddAction, suppressionRemoveAction, suppressionsPage } from "./pages/suppressions.js";
import { webhookPage, webhookReplayAction, webhooksPage } from "./pages/webhooks.js";
import { crossOrigin, SAFE_METHODS, securityHeaders } from "./security.js";
import { createSessionStore, csrfMatches, sessionCookie } from "./session.js";
import { CONSOLE_CSS, CONSOLE_ICON } from "./style.js";

/** The console's forms are small; a selection of 200 dead letters is a few kilobytes. */
const MAX_FORM_BYTES = 64 * 1024;

const refusal = (c: ConsoleContext, message: string, status: PageStatus | 401 | 403 | 413) =>
  render(
    c,
    {
      title: status === 404 ? "Not found" : status >= 500 ? "Error" : "Refused",
      body: html`<p class="error" data-testid="error" role="alert">${message}</p>`,
    },
    status,
  );

/**
 * The operator console at /console on the operator's port: server-rendered pages over the
 * public API (see ./api.ts), signed in with an operator key (./session.ts), no script anywhere.
 */
export function mountConsole(app: HonoApp<AppEnv>, options: ConsoleOptions): void {
  const sessions = options.sessions ?? createSessionStore();
  const cookie = sessionCookie(options.tls === true);
  const ui = new Hono<ConsoleEnv>();
  const login = loginRoutes(options, sessions, cookie);

  ui.use(securityHeaders);
  ui.use(async (c, next) => {
    // Refused before the body is read or a session looked at: a form posted from another origin.
    if (crossOrigin(c)) return refusal(c, "Cross-origin request refused.", 403);
    return next();
  });
  ui.use(
    bodyLimit({ maxSize: MAX_FORM_BYTES, onError: (c) => refusal(c as ConsoleContext, "The form is too large.", 413) }),
  );

  ui.get("/console.css", (c) => c.body(CONSOLE_CSS, 200, { "content-type": "text/css; charset=utf-8" }));
  ui.get("/favicon.svg", (c) => c.body(CONSOLE_ICON, 200, { "content-type": "image/svg+xml" }));
  ui.get("/login", login.show);
  ui.post("/login", login.submit);

  /**
   * Everything else needs an operator: a session (its cookie; every POST with the session's
   * CSRF token) or a script's `Authorization: Bearer <operator key>`, which carries no ambient
   * credential and so needs no token. Either way the API decides what the key may do.
   */
  const authenticate: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
    const budget = options.preauthThrottle.budget(clientAddress(c));
    const requestId = c.get("requestId");
    const authorization = c.req.header("authorization");
    if (authorization !== undefined) {
      const key = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
      if (key === undefined) return refusal(c, "Authorization must use the Bearer scheme.", 401);
      // A key the API can vouch for without a lookup is never held back by the budget. Any other
      // is refused before it is tried when the address is out of failed attempts (429); its
      // attempt is spent at once and given back unless the key was refused (401), so requests
      // sent in parallel cannot each try a key on the same last attempt.
      const vouched = options.vouches?.(key) ?? false;
      if (!vouched) {
        budget.check();
        budget.charge();
      }
      c.set("operator", { api: apiClient(options.api, key, requestId), budget });
      let refused = false;
      try {
        await next();
        refused = c.res.status === 401;
      } finally {
        if (vouched && refused) budget.charge();
        if (!vouched && !refused) budget.refund();
      }
      return;
    }
    const sessionId = cookie.read(c);
    const session = sessions.get(sessionId);
    if (session === undefined) return c.redirect("/console/login", 303);
    if (!SAFE_METHODS.has(c.req.method) && !csrfMatches(session, field(await formOf(c), "csrf"))) {
      return refusal(c, "The form's CSRF token is missing or wrong: reload the page and try again.", 403);
    }
    c.set("operator", { api: apiClient(options.api, session.key, requestId), session, sessionId, budget });
    return next();
  };
  ui.use(authenticate);

  ui.post("/logout", login.logout);
  ui.get("/", overviewPage);
  ui.get("/notifications", searchPage);
  ui.get("/notifications/:id", (c) => notificationPage(c, options.traceUrl));
  ui.get("/streams", streamsPage);
  ui.get("/providers", providersPage);
  ui.get("/dead-letters", deadLettersPage);
  ui.post("/dead-letters/replay", replayAction);
  ui.get("/dead-letters/replayed", replayedPage);
  ui.get("/dead-letters/:seq", deadLetterPage);
  ui.get("/broadcasts", broadcastsPage);
  ui.get("/webhooks", webhooksPage);
  ui.get("/webhooks/:id", webhookPage);
  ui.post("/webhooks/:id/replay", webhookReplayAction);
  ui.get("/suppressions", suppressionsPage);
  ui.post("/suppressions/add", suppressionAddAction);
  ui.post("/suppressions/remove", suppressionRemoveAction);
  ui.post("/broadcasts/:id/pause", (c) => broadcastAction(c, "pause"));
  ui.post("/broadcasts/:id/resume", (c) => broadcastAction(c, "resume"));
  ui.post("/broadcasts/:id/cancel", (c) => broadcastAction(c, "cancel"));
  ui.all("*", (c) => refusal(c, `No console page at ${c.req.path}.`, 404));

  ui.onError(async (error, c) => {
    if (error instanceof KeyRefused) {
      const status = error.problem.status === 403 ? 403 : 401;
      const operator = c.get("operator");
      if (operator?.session === undefined) {
        // A script's key: an unknown one keeps the attempt spent for it (see authenticate).
        return refusal(
          c,
          status === 403 ? "This key lacks the operator scope." : "The key is unknown or revoked.",
          status,
        );
      }
      c.get("log").info({ status }, "console session ended: the API refused its key");
      return signedOut(
        c,
        sessions,
        cookie,
        status === 403
          ? "This session's key no longer has the operator scope: sign in again with an operator key."
          : "This session's key was revoked or is unknown: sign in again.",
        status,
      );
    }
    if (error instanceof AppError && error.code === "rate_limited") {
      const seconds = error.context?.retryAfterSeconds;
      if (typeof seconds === "number") c.header("retry-after", String(seconds));
      return refusal(c, "Too many failed attempts from this address; wait and try again.", 429);
    }
    c.get("log").error({ err: error }, "console page failed");
    return refusal(c, `This page failed; the ingest log has the details (request id ${c.get("requestId")}).`, 500);
  });

  app.route("/console", ui);
}
