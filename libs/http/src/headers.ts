import type { Context, Next } from "hono";

/**
 * The headers middleware promised the request's answer, kept as a plain object: Hono would keep
 * them in a `Headers` instance, which costs more per request than what most routes do, and
 * @hono/node-server writes an answer whose headers are a plain object without converting them.
 */
interface HeaderBag {
  values: Record<string, string>;
  /** The answer built with them (jsonResponse): if it is the one sent, nothing is left to add. */
  sent: Response | null;
}

/**
 * Each request's bag, on its context under a symbol: nothing to declare in every app's
 * variables, and cheaper than a WeakMap entry per request (an ephemeron the collector tracks).
 */
const BAG = Symbol("responseHeaders");
type Bagged = Context & { [BAG]?: HeaderBag };

/**
 * Adds headers to whatever answer the request gets, error answers included; a header the route
 * set itself wins. An answer built with `jsonResponse` carries them already; any other gets those
 * it lacks once the whole chain is done (`applyPromisedHeaders`, in newApp's first middleware),
 * so a middleware that only promises headers passes the request on without a frame of its own.
 */
export function promiseHeaders(c: Context, headers: Readonly<Record<string, string>>): void {
  let bag = (c as Bagged)[BAG];
  if (bag === undefined) {
    bag = { values: {}, sent: null };
    (c as Bagged)[BAG] = bag;
  }
  // for...in over a plain literal: no entry arrays per request, as Object.entries would make.
  for (const name in headers) bag.values[name] = headers[name] as string;
}

/** Middleware's form of promiseHeaders: promises `headers` and passes the request on. */
export function responseHeaders(c: Context, next: Next, headers: Readonly<Record<string, string>>): Promise<void> {
  promiseHeaders(c, headers);
  return next();
}

/**
 * Gives the finished answer the promised headers it lacks, unless it is the one built with them.
 * Never throws: a header whose value an answer refuses is left out.
 */
export function applyPromisedHeaders(c: Context): void {
  const bag = (c as Bagged)[BAG];
  if (bag === undefined || (bag.sent !== null && c.res === bag.sent)) return;
  for (const name in bag.values) {
    const value = bag.values[name] as string;
    if (c.res.headers.has(name)) continue;
    try {
      c.res.headers.set(name, value);
    } catch {
      // An answer whose headers are immutable (one fetched, a Response.redirect): copied once.
      try {
        c.res = new Response(c.res.body, c.res);
        c.res.headers.set(name, value);
      } catch {
        // A value no answer takes (from configuration): the answer goes without it.
      }
    }
  }
}

/**
 * A JSON answer with the headers middleware promised (`promiseHeaders`) and `headers`, built as
 * one plain object: the cheapest answer there is, for the routes that run most.
 */
export function jsonResponse(
  c: Context,
  body: unknown,
  status: number,
  headers?: Readonly<Record<string, string>>,
): Response {
  const bag = (c as Bagged)[BAG];
  const all: Record<string, string> = {};
  if (bag !== undefined) for (const name in bag.values) all[name] = bag.values[name] as string;
  if (headers !== undefined) for (const name in headers) all[name] = headers[name] as string;
  all["content-type"] = "application/json";
  const response = new Response(JSON.stringify(body), { status, headers: all });
  if (bag !== undefined) bag.sent = response;
  return response;
}
