import { AppError } from "@notify/core";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";

/**
 * Refuses bodies over `maxBytes` with a 413 problem before they are read whole. A declared
 * Content-Length is checked from the header alone; only a chunked body is counted while it
 * streams in, because wrapping every request's body in a counting stream would be among the
 * largest costs of ingest's hottest route.
 */
export const limitBody = (maxBytes: number): MiddlewareHandler => {
  const tooLarge = () => {
    throw new AppError("payload_too_large", `the request body exceeds ${maxBytes} bytes`);
  };
  const streaming = bodyLimit({ maxSize: maxBytes, onError: tooLarge });
  return (c, next) => {
    const declared = c.req.header("content-length");
    if (declared === undefined) return streaming(c, next);
    if (!/^\d+$/.test(declared) || Number(declared) > maxBytes) tooLarge();
    return next();
  };
};

/** Reads a JSON body: 415 for another media type, 400 for malformed JSON. */
export async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/([a-z0-9.+-]+\+)?json(\s*;.*)?$/i.test(type.trim())) {
    throw new AppError("unsupported_media_type", "send the body as application/json");
  }
  const text = await c.req.text();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AppError("malformed_json", "the request body is not valid JSON");
  }
  // Only a \u escape can put U+0000 or a lone surrogate into a parsed string; most bodies have none.
  const bad = text.includes("\\u") ? unstorablePath(value, "") : undefined;
  if (bad !== undefined) {
    const field = bad || "(body)";
    const message = "must not contain U+0000 or an unpaired UTF-16 surrogate (Postgres cannot store them)";
    throw new AppError("validation_failed", `${field}: ${message}`, { fields: [{ field, message }] });
  }
  return value;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const unstorable = (text: string) => text.includes("\u0000") || LONE_SURROGATE.test(text);

/**
 * The dot path of the first string (value or key) that Postgres would refuse: text and jsonb
 * cannot hold U+0000, and jsonb refuses an unpaired surrogate. Caught here, such input is a 400
 * for its own request instead of failing the statement of a whole ingest batch.
 */
function unstorablePath(value: unknown, path: string): string | undefined {
  if (typeof value === "string") return unstorable(value) ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorablePath(value[i], path ? `${path}.${i}` : String(i));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const at = path ? `${path}.${key}` : key;
      if (unstorable(key)) return at;
      const found = unstorablePath(item, at);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
