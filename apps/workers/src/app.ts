import { createHash, timingSafeEqual } from "node:crypto";
import { AppError } from "@notify/core";
import { type AppEnv, type HealthChecks, type MetricsRegistry, mountHealth, mountMetrics, newApp } from "@notify/http";
import type { Logger } from "@notify/log";
import type { Hono, MiddlewareHandler } from "hono";
import type { ProviderBreaker } from "./providers/breaker.js";

export interface AppDeps {
  log: Logger;
  metrics: MetricsRegistry;
  breakers: readonly ProviderBreaker[];
  /** WORKERS_ADMIN_TOKEN; without it the admin routes do not exist. */
  adminToken: string | undefined;
  checks: HealthChecks;
  isStopping: () => boolean;
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/**
 * Bearer token check in constant time: both sides are hashed first, so neither the content nor
 * the length of the token leaks through timing.
 */
function requireToken(token: string): MiddlewareHandler<AppEnv> {
  const expected = digest(token);
  return async (c, next) => {
    const header = c.req.header("authorization");
    const presented = header?.startsWith("Bearer ") ? header.slice("Bearer ".length) : undefined;
    const challenge = 'Bearer realm="notify-workers"';
    if (presented === undefined) {
      throw new AppError("unauthenticated", "an admin token is required", { context: { wwwAuthenticate: challenge } });
    }
    if (!timingSafeEqual(digest(presented), expected)) {
      throw new AppError("unauthenticated", "the admin token is not valid", {
        context: { wwwAuthenticate: `${challenge}, error="invalid_token"` },
      });
    }
    await next();
  };
}

/** The workers' own port: health, readiness, Prometheus metrics and the breaker admin view. */
export function createApp(deps: AppDeps): Hono<AppEnv> {
  const app = newApp(deps.log, { metrics: deps.metrics });
  mountHealth(app, deps.checks, deps.isStopping);
  mountMetrics(app, deps.metrics);
  if (deps.adminToken !== undefined) {
    app.use("/admin/*", requireToken(deps.adminToken));
    // This process's breakers: each judges its provider on its own calls and takes the other
    // worker processes' decisions (notify_breakers).
    app.get("/admin/breakers", (c) => {
      c.header("cache-control", "no-store");
      return c.json({ pid: process.pid, data: deps.breakers.map((b) => b.snapshot()) });
    });
  }
  return app;
}
