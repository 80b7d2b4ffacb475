import type { Logger } from "@notify/log";
import type { Hono } from "hono";
import { type AppEnv, type AppOptions, newApp } from "./app.js";
import type { MetricsRegistry } from "./metrics.js";
import { mountMetrics } from "./metrics.js";

/** /healthz only: what a public port answers, so a load balancer can tell the process is alive. */
export function mountLiveness(app: Hono<AppEnv>): void {
  app.get("/healthz", (c) => c.json({ status: "ok" }));
}

/**
 * The operator's server: /healthz, /readyz and /metrics, on a port of its own (loopback by
 * default) so that neither readiness details nor metrics are reachable where the API is.
 */
export function createAdminApp(
  log: Logger,
  checks: HealthChecks,
  isStopping: () => boolean,
  metrics?: MetricsRegistry,
  options: Pick<AppOptions, "trustedProxies"> = {},
): Hono<AppEnv> {
  const app = newApp(log, options);
  mountHealth(app, checks, isStopping);
  if (metrics !== undefined) mountMetrics(app, metrics);
  return app;
}

export interface HealthChecks {
  /** Named readiness checks; the app is ready when all pass. */
  [name: string]: () => Promise<boolean> | boolean;
}

/** /healthz: the process is alive. /readyz: its dependencies answer and it takes work. */
export function mountHealth(app: Hono<AppEnv>, checks: HealthChecks, isStopping: () => boolean): void {
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    const results: Record<string, boolean> = {};
    await Promise.all(
      Object.entries(checks).map(async ([name, check]) => {
        try {
          results[name] = await check();
        } catch {
          results[name] = false;
        }
      }),
    );
    const ready = !isStopping() && Object.values(results).every(Boolean);
    return c.json(
      { status: ready ? "ready" : "not_ready", stopping: isStopping(), checks: results },
      ready ? 200 : 503,
    );
  });
}
