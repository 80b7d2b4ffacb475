import { mountHealth, newApp, versionLifecycle } from "@notify/http";
import { Hono } from "hono";
import { type AuthEnv, authenticate } from "./auth/middleware.js";
import { createRateLimiter } from "./auth/rate-limit.js";
import type { IngestDeps } from "./deps.js";
import { mountKeys } from "./routes/keys.js";
import { mountNotifications } from "./routes/notifications.js";

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
  app.route("/api/v1", v1);
  return app;
}
