import { extractHeaders, SpanKind, SpanStatusCode, withSpan } from "@notify/telemetry";
import type { MiddlewareHandler } from "hono";

/**
 * A SERVER span per request (only installed while tracing is on), the child of the caller's
 * span when the request carries a W3C `traceparent`: everything the request does, its access
 * log line included, runs inside it. Named `<method> <route pattern>` once the route is known;
 * like the access log, it records the pattern, never the path's ids or the query string.
 * `skip`: paths traced by no one (probes and scrapes every few seconds).
 */
export function serverSpans(skip: ReadonlySet<string>): MiddlewareHandler {
  return async (c, next) => {
    if (skip.has(c.req.path)) return next();
    const method = c.req.method;
    await withSpan(
      method,
      {
        kind: SpanKind.SERVER,
        parent: extractHeaders(c.req.raw.headers),
        attributes: { "http.request.method": method },
      },
      async (span) => {
        await next();
        if (span === undefined) return;
        const route = c.req.routePath === "/*" ? "(unmatched)" : c.req.routePath;
        const status = c.res.status;
        span.updateName(`${method} ${route}`);
        span.setAttribute("http.route", route);
        span.setAttribute("http.response.status_code", status);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      },
    );
  };
}
