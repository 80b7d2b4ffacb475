import { mountHealth, newApp, versionLifecycle } from "@notify/http";
import { Hono } from "hono";
import { type AuthEnv, authenticate } from "./auth/middleware.js";
import { createRateLimiter } from "./auth/rate-limit.js";
import type { IngestDeps } from "./deps.js";
import { mountOpenApi } from "./openapi/index.js";
import { mountAudiences } from "./routes/audiences.js";
import { mountBroadcasts } from "./routes/broadcasts.js";
import { mountInbox } from "./routes/inbox.js";
import { mountKeys } from "./routes/keys.js";
import { mountLists } from "./routes/lists.js";
import { mountNotifications } from "./routes/notifications.js";
import { mountPreferences } from "./routes/preferences.js";
import { mountTemplates } from "./routes/templates.js";
import { mountUsers } from "./routes/users.js";

export type { IngestDeps } from "./deps.js";

export function createApp(deps: IngestDeps) {
  const app = newApp(deps.log);
  mountHealth(app, { postgres: () => deps.database.ping(), nats: () => deps.bus.isConnected() }, deps.isStopping);

  // Every route of the public API lives under the version prefix (spec: Versioning).
  const v1 = new Hono<AuthEnv>();
  v1.use(versionLifecycle("v1", deps.lifecycle ?? {}));
  v1.use(authenticate(deps.lookupKey, deps.rateLimiter ?? createRateLimiter({ perSecond: 1000, burst: 2000 })));
  mountNotifications(v1, deps);
  mountKeys(v1, deps);
  mountPreferences(v1, deps);
  mountTemplates(v1, deps);
  mountUsers(v1, deps);
  mountInbox(v1, deps);
  mountLists(v1, deps);
  mountAudiences(v1, deps);
  mountBroadcasts(v1, deps);
  mountOpenApi(v1);
  app.route("/api/v1", v1);
  return app;
}
