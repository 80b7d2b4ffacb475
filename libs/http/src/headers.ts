import type { Context, Next } from "hono";

/**
 * Adds headers to whatever answer the rest of the chain produces. They are set before the
 * handler runs, so Hono builds the response with them; changing a finished response instead
 * rebuilds it around a body stream, which costs more than the handler itself. An error answer
 * is built later by onError, so it gets them afterwards.
 */
export async function responseHeaders(c: Context, next: Next, headers: Record<string, string>): Promise<void> {
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  await next();
  if (c.error) for (const [name, value] of Object.entries(headers)) c.header(name, value);
}
