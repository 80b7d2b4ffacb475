import { randomUUID } from "node:crypto";
import { type ServerType, serve } from "@hono/node-server";
import { AppError } from "@notify/core";
import type { Logger } from "@notify/log";
import { tracingOn } from "@notify/telemetry";
import { type Context, Hono } from "hono";
import type { TrustedProxies } from "./client-address.js";
import { toAppError } from "./dependency.js";
import { applyPromisedHeaders, promiseHeaders } from "./headers.js";
import type { MetricsRegistry } from "./metrics.js";
import { mountMetrics, requestMetrics } from "./metrics.js";
import { problemResponse, toProblem } from "./problem.js";
import { type RequestLogger, requestLogger } from "./request-logger.js";
import { serverSpans } from "./tracing.js";

export { DEPENDENCY_RETRY_AFTER_SECONDS, retryLogLevel, toAppError, unavailableDependency } from "./dependency.js";
export { createForgettableCache } from "./forgettable-cache.js";
export { jsonResponse, promiseHeaders, responseHeaders } from "./headers.js";
export { PROBLEM_TYPE_BASE } from "./problem.js";

export interface AppEnv {
  Variables: {
    requestId: string;
    log: RequestLogger;
    access?: Record<string, unknown>;
    /** The proxies whose X-Forwarded-For clientAddress believes; unset: none. */
    trustedProxies?: TrustedProxies;
  };
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
const NUL_IN_URL = /%00/i;
const OPERATOR_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

export interface AppOptions {
  /** Adds the request-duration histogram (by method, route pattern and status) to this registry. */
  metrics?: MetricsRegistry;
  /** The proxies in front of the app whose X-Forwarded-For names the client (TRUSTED_PROXIES). */
  trustedProxies?: TrustedProxies;
}

/**
 * Adds fields to the request's access log line: what a route did (a webhook's stored and
 * duplicate events) goes on the one line per request instead of a line of its own.
 */
export function noteAccess(c: Context<AppEnv>, fields: Record<string, unknown>): void {
  c.set("access", { ...c.get("access"), ...fields });
}

/** The client an authenticated request acts for, when a route's authentication set one. */
const clientOf = (c: Context<AppEnv>): string | undefined =>
  (c.var as { principal?: { clientId?: string } }).principal?.clientId;

/**
 * A Hono app with the house conventions: a request id (echoed in X-Request-Id), a child
 * logger per request, one access log line per request at info (method, route pattern, status,
 * duration, client id; the path's ids and the query string stay out, as they may carry personal
 * data or secrets, and never a key), and every error turned into application/problem+json.
 */
export function newApp(log: Logger, options: AppOptions = {}): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const durations = options.metrics === undefined ? undefined : requestMetrics(options.metrics);
  // First, so that the access log line and the error answers below are inside the request's span.
  if (tracingOn()) app.use(serverSpans(OPERATOR_PATHS));
  // One middleware for what every request gets: its id, its logger, the promised headers, the
  // answer to anything thrown, the duration metric and the access line. Hono hands only Error
  // instances to onError; anything else thrown (a string, null, a Proxy) would escape as a bare
  // 500 without a body, so it is answered here the same way. A NUL can reach no column (Postgres
  // text refuses it): refused here for every route, path parameters and query strings alike,
  // instead of failing in a query.
  app.use(async (c, next) => {
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const started = performance.now();
    c.set("requestId", requestId);
    c.set("log", requestLogger(log, { request_id: requestId }));
    if (options.trustedProxies !== undefined) c.set("trustedProxies", options.trustedProxies);
    promiseHeaders(c, { "x-request-id": requestId });
    try {
      if (NUL_IN_URL.test(c.req.url)) {
        throw new AppError("validation_failed", "the URL must not contain %00 (NUL)", {
          fields: [{ field: "(url)", message: "must not contain %00 (NUL)" }],
        });
      }
      await next();
    } catch (thrown) {
      // Unset first: Hono's setter would copy a half-built answer's headers (cookies) onto this one.
      c.res = undefined;
      c.res = answerError(thrown, c, log);
    }
    applyPromisedHeaders(c);
    const status = c.res.status;
    const seconds = (performance.now() - started) / 1000;
    // After next() the route path is the matched handler's; "/*" is this middleware's own.
    const route = c.req.routePath === "/*" ? "(unmatched)" : c.req.routePath;
    durations?.observe(c.req.method, route, status, seconds);
    const operator = OPERATOR_PATHS.has(c.req.path);
    // A readiness probe answering 503 (starting, stopping, a dependency down) is its job, not a
    // failure: what made it unready is logged where it happened. Probes and scrapes every few
    // seconds would drown the access log, so they are logged at debug.
    const level = status >= 500 && !operator ? "error" : operator ? "debug" : "info";
    if (!log.isLevelEnabled(level)) return;
    const clientId = clientOf(c);
    c.get("log")[level](
      {
        method: c.req.method,
        route,
        status,
        ms: Math.round(seconds * 1000),
        ...(clientId === undefined ? {} : { client_id: clientId }),
        ...c.get("access"),
      },
      "request",
    );
  });
  app.onError((error, c) => answerError(error, c, log));
  app.notFound((c) =>
    problemResponse(
      toProblem(new AppError("not_found", `no route for ${c.req.method} ${c.req.path}`), c.get("requestId")),
    ),
  );
  return app;
}

/**
 * The one answer to a thrown value, for every app: toAppError (dependency.ts) decides, so a
 * route that forgets to wrap a query still answers an outage with 503 and Retry-After, and a
 * bug is still a 500, logged with its cause; neither body carries internals.
 */
function answerError(error: unknown, c: Context<AppEnv>, log: Logger): Response {
  const appError = toAppError(error);
  if (appError.status >= 500) {
    const requestLog = c.get("log") ?? log;
    const line = { err: error, code: appError.code, dependency: appError.context?.dependency };
    try {
      if (appError.code === "dependency_unavailable") requestLog.warn(line, "request failed: dependency unavailable");
      else requestLog.error(line, "request failed");
    } catch {
      // A thrown value the serializer cannot read must not turn the answer into a crash.
      requestLog.error({ code: appError.code }, "request failed (the thrown value could not be logged)");
    }
  }
  const requestId = c.get("requestId");
  // Set here as well: the answer carries its request id however it is reached.
  const headers: Record<string, string> = requestId ? { "x-request-id": requestId } : {};
  const retryAfter = appError.context?.retryAfterSeconds;
  if (typeof retryAfter === "number") headers["retry-after"] = String(retryAfter);
  const challenge = appError.context?.wwwAuthenticate;
  if (typeof challenge === "string") headers["www-authenticate"] = challenge;
  const extra = appError.context?.headers;
  if (extra && typeof extra === "object") Object.assign(headers, extra);
  return problemResponse(toProblem(appError, requestId, c.req.path), headers);
}

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

export interface HttpServer {
  server: ServerType;
  port: number;
  close(): Promise<void>;
}

/**
 * How long a client may take, against slow clients holding sockets open (slowloris): the
 * request head, the whole request (head and body; a streamed answer is not bound by it), and an
 * idle keep-alive connection between requests.
 */
export interface ServerTimeouts {
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
}

export const DEFAULT_SERVER_TIMEOUTS: Required<ServerTimeouts> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/**
 * Serves a Hono app and resolves once it listens (port 0 picks a free port); rejects when it
 * cannot (the port taken, the address not this machine's).
 */
export function listen(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  port: number,
  host = "0.0.0.0",
  timeouts: ServerTimeouts = {},
): Promise<HttpServer> {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = { ...DEFAULT_SERVER_TIMEOUTS, ...timeouts };
  // Node refuses a head timeout above the request timeout; 0 (no limit) is only honoured for both.
  const requestTimeout = requestTimeoutMs;
  const headersTimeout = requestTimeout === 0 ? headersTimeoutMs : Math.min(headersTimeoutMs, requestTimeout);
  const serverOptions = {
    headersTimeout,
    requestTimeout,
    // How often Node looks for sockets past those timeouts (30 s by default, longer than the timeouts).
    connectionsCheckingInterval: Math.max(
      100,
      Math.min(1000, ...[headersTimeout, requestTimeout].filter((ms) => ms > 0).map((ms) => ms / 2)),
    ),
  };
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: host, serverOptions }, (info) => {
      server.off("error", reject);
      (server as unknown as { keepAliveTimeout: number }).keepAliveTimeout = keepAliveTimeoutMs;
      resolve({
        server,
        port: info.port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Idle keep-alive sockets would hold close() open until they time out.
            (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
          }),
      });
    });
    server.once("error", reject);
  });
}

/**
 * An app started by its `start` function: what its process's entry (or the one process that runs
 * all four apps) needs to stop it on a signal.
 */
export interface RunningApp {
  log: Logger;
  /** How long its stop may take before the process gives up and exits 1. */
  shutdownTimeoutMs: number;
  /** Stops taking work, finishes what is in hand, closes its servers and connections. */
  stop(): Promise<void>;
}

/**
 * What an app's start has opened so far (connections, servers, background work), closed newest
 * first when the start fails part-way: with the four apps in one process, the process lives on
 * to stop the apps already running.
 */
export function startScope() {
  const closers: Array<() => unknown> = [];
  return {
    /** Answers `value`, to be closed with `close` if the start fails. */
    add<T>(value: T, close: (value: T) => unknown): T {
      closers.push(() => close(value));
      return value;
    },
    /** Closes what was added, newest first; a close that fails does not keep the others open. */
    async close(): Promise<void> {
      for (let close = closers.pop(); close !== undefined; close = closers.pop()) {
        try {
          await close();
        } catch {
          // The start's own error is the one reported.
        }
      }
    },
  };
}

/**
 * Runs `stop` once on SIGTERM or SIGINT and exits 0 when it finishes, or 1 when it takes
 * longer than the timeout. One place per process registers shutdown.
 */
export function onShutdown(log: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      log.error({ timeoutMs }, "shutdown timed out");
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    stop().then(
      () => {
        log.info("stopped");
        process.exit(0);
      },
      (error: unknown) => {
        log.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => handler("SIGTERM"));
  process.once("SIGINT", () => handler("SIGINT"));
}
export { limitBody, readJson, validate } from "./body.js";
export { clientAddress, type TrustedProxies, trustedProxies } from "./client-address.js";
export {
  type Counter,
  createMetrics,
  DURATION_BUCKETS,
  METRICS_CONTENT_TYPE,
  MetricsRegistry,
  mountMetrics,
} from "./metrics.js";
export { prepareStreams } from "./streams.js";
export { type AttemptBudget, type AttemptThrottle, addressBucket, createAttemptThrottle } from "./throttle.js";
export { createUnverifiedReads, type UnverifiedReadLimits, type UnverifiedReads } from "./unverified-reads.js";
export { type VersionLifecycle, versionLifecycle } from "./versioning.js";
