import { randomUUID } from "node:crypto";
import { AppError } from "@notify/core";
import { type Logger, leanLogger } from "@notify/log";
import { tracingOn } from "@notify/telemetry";
import { type Context, Hono } from "hono";
import type { TrustedProxies } from "./client-address.js";
import { toAppError } from "./dependency-errors.js";
import { applyPromisedHeaders, promiseHeaders } from "./headers.js";
import type { MetricsRegistry } from "./metrics.js";
import { requestMetrics } from "./metrics.js";
import { problemResponse, toProblem } from "./problem.js";
import { type RequestLogger, requestLogger } from "./request-logger.js";
import { serverSpans } from "./tracing.js";

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
  // The access line holds only fields this code sets (the request's bindings: its id and the
  // principal's ids; the method, route pattern, status and duration; what a route noted), never a
  // header, body, path or query string: a lean logger's line, with no child logger per request.
  const accessLog = leanLogger(log);
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
    accessLog[level](
      {
        ...c.get("log").bindings(),
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
