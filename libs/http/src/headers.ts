import type { Context, Next } from "hono";

/**
 * Adds headers to whatever answer the rest of the chain produces. They are set before the
 * handler runs, so Hono builds the response with them; changing a finished response instead
 * rebuilds it around a body stream, which costs more than the handler itself. An error answer
 * is built later by onError, so it gets them afterwards.
 */
export async function responseHeaders(c: Context, next: Next, headers: Record<string, string>): Promise<void> {
  setAll(c, headers);
  await next();
  if (c.error) setAll(c, headers);
}

// for...in over a plain literal: no entry arrays per request, as Object.entries would make.
function setAll(c: Context, headers: Record<string, string>): void {
  for (const name in headers) c.header(name, headers[name]);
}
