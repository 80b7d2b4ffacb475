import { mountHealth, newApp } from "@notify/http";
import { Hono } from "hono";
import type { AuthEnv } from "./auth/middleware.js";
import type { IngestDeps } from "./deps.js";
import { mountNotifications } from "./routes/notifications.js";

export type { IngestDeps } from "./deps.js";

export function createApp(deps: IngestDeps) {
  const app = newApp(deps.log);
  mountHealth(app, { postgres: () => deps.database.ping(), nats: () => deps.bus.isConnected() }, deps.isStopping);

  // Every route of the public API lives under the version prefix (spec: Versioning).
  const v1 = new Hono<AuthEnv>();
  mountNotifications(v1, deps);
  app.route("/api/v1", v1);
  return app;
}
