import { type ConsoleOptions, mountConsole } from "@notify/console";
import {
  createAdminApp as adminApp,
  createAttemptThrottle,
  mountLiveness,
  newApp,
  versionLifecycle,
} from "@notify/http";
import { Hono } from "hono";
import { type AuthEnv, authenticate } from "./auth/middleware.js";
import { createRateLimiter } from "./auth/rate-limit.js";
import type { IngestDeps } from "./deps.js";
import { inboxCors } from "./inbox/cors.js";
import { DEFAULT_INBOX_SETTINGS } from "./inbox/settings.js";
import { mountAudiences } from "./routes/audiences.js";
import { mountBroadcasts } from "./routes/broadcasts.js";
import { mountCancel } from "./routes/cancel.js";
import { mountDeadLetters } from "./routes/dead-letters.js";
import { mountDocs } from "./routes/docs.js";
import { INBOX_PATH, mountInbox } from "./routes/inbox.js";
import { mountKeys } from "./routes/keys.js";
import { mountNotifications } from "./routes/notifications.js";
import { mountOps } from "./routes/ops.js";
import { mountPreferences } from "./routes/preferences.js";
import { mountSuppressions } from "./routes/suppressions.js";
import { mountTemplates } from "./routes/templates.js";
import { mountUnsubscribe } from "./routes/unsubscribe.js";
import { mountUsers } from "./routes/users.js";
import { mountWebhooks } from "./routes/webhooks.js";

const API = "/api/v1";

/**
 * Readiness (Postgres and NATS answer, not stopping) and metrics, on the operator's port; with
 * `console`, the operator console at /console too, which acts only through `console.api` (the
 * public app) with the signed-in operator's key.
 */
export function createAdminApp(
  deps: Pick<IngestDeps, "log" | "database" | "bus" | "isStopping" | "metrics" | "trustedProxies"> & {
    console?: ConsoleOptions;
  },
) {
  const app = adminApp(
    deps.log,
    { postgres: () => deps.database.ping(), nats: () => deps.bus.isConnected() },
    deps.isStopping,
    deps.metrics,
    // The console behind a TLS proxy counts sign-ins by the address the proxy forwarded.
    deps.trustedProxies === undefined ? {} : { trustedProxies: deps.trustedProxies },
  );
  if (deps.console !== undefined) mountConsole(app, deps.console);
  return app;
}

export function createApp(given: IngestDeps) {
  const deps = {
    ...given,
    preauthThrottle: given.preauthThrottle ?? createAttemptThrottle({ perSecond: 2, burst: 60 }),
  };
  const app = newApp(deps.log, {
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    ...(deps.trustedProxies === undefined ? {} : { trustedProxies: deps.trustedProxies }),
  });
  mountLiveness(app);
  // One-click unsubscribe links from email: no API key, the link's token is its own authority.
  mountUnsubscribe(app, deps);

  // Every route of the public API lives under the version prefix.
  const v1 = new Hono<AuthEnv>();
  // The inbox routes take a user's inbox token instead: no API key is looked up there.
  const inbox = `${API}${INBOX_PATH}`;
  const inboxRoutes = (path: string) => path === inbox || path.startsWith(`${inbox}/`);
  // Browsers call them from the caller's pages (preflights answered here, before anything else);
  // no other route answers CORS.
  const cors = inboxCors(deps.inbox?.corsOrigins ?? DEFAULT_INBOX_SETTINGS.corsOrigins);
  v1.use((c, next) => (inboxRoutes(c.req.path) ? cors(c, next) : next()));
  const lifecycle = versionLifecycle("v1", deps.lifecycle ?? {});
  if (lifecycle !== null) v1.use(lifecycle);
  v1.use(
    authenticate(
      deps.lookupKey,
      deps.rateLimiter ?? createRateLimiter({ perSecond: 1000, burst: 2000 }),
      inboxRoutes,
      deps.preauthThrottle,
    ),
  );
  mountNotifications(v1, deps);
  mountCancel(v1, deps);
  mountKeys(v1, deps);
  mountPreferences(v1, deps);
  mountTemplates(v1, deps);
  mountUsers(v1, deps);
  mountInbox(v1, deps);
  mountDeadLetters(v1, deps);
  mountAudiences(v1, deps);
  mountBroadcasts(v1, deps);
  mountWebhooks(v1, deps);
  mountSuppressions(v1, deps);
  mountOps(v1, deps);
  mountDocs(v1, () => app);
  app.route(API, v1);
  return app;
}
