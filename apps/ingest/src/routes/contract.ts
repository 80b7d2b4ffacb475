import { ERROR_CODES, ERROR_TITLES, type ErrorCode, type Scope } from "@notify/core";
import { PROBLEM_TYPE_BASE } from "@notify/http";
import { toJsonSchema } from "@valibot/to-json-schema";
import type { Env, Hono, MiddlewareHandler } from "hono";
import { describeRoute, generateSpecs, resolver } from "hono-openapi";
import * as v from "valibot";
import { requireScope } from "../auth/middleware.js";
import { webhookOperations } from "./webhook-events.js";

type Json = Record<string, unknown>;
type Schema = v.GenericSchema;

/** Every time the API answers with, as JSON strings. */
export const Timestamp = v.pipe(v.string(), v.isoTimestamp());

/** Requests are described as what a client may send, not what the handler makes of it. */
const REQUEST_OPTIONS = { typeMode: "input", errorMode: "ignore" } as const;
const RESPONSE_OPTIONS = { errorMode: "ignore" } as const;

export interface ResponseContract {
  description: string;
  schema?: Schema;
  /** application/json unless given. */
  contentType?: string;
  headers?: Record<string, string>;
}

/**
 * What one operation of the public API accepts and answers, written beside its handler with
 * the very valibot schemas the handler validates with, so the document cannot drift from it.
 */
export interface Contract {
  summary: string;
  description?: string;
  tag: string;
  /** null: no API key needed. */
  scope: Scope | null;
  body?: Schema;
  query?: Schema;
  headers?: Array<{ name: string; required: boolean; description: string }>;
  responses: Record<number, ResponseContract>;
  /** Problem codes this operation may answer with, beyond the ones every operation has. */
  problems: ErrorCode[];
}

/** Problems any authenticated /api/v1 operation may answer with (validation_failed: %00 in the URL). */
export const COMMON_PROBLEMS: ErrorCode[] = [
  "invalid_request",
  "validation_failed",
  "unauthenticated",
  "invalid_api_key",
  "insufficient_scope",
  "rate_limited",
  "version_sunset",
  "internal",
  "dependency_unavailable",
];

/** What a route without an API key can still answer: a NUL in the URL, a sunset version, a bug. */
const KEYLESS_PROBLEMS: ErrorCode[] = ["validation_failed", "version_sunset", "internal"];

const STATUS_TEXT: Record<number, string> = {
  400: "Bad request",
  401: "Unauthenticated",
  403: "Forbidden",
  404: "Not found",
  409: "Conflict",
  410: "Gone",
  413: "Payload too large",
  415: "Unsupported media type",
  422: "Unprocessable content",
  429: "Too many requests",
  500: "Internal error",
  503: "Unavailable",
};

/** Problem codes grouped by their HTTP status, for the responses of one operation. */
function problemsByStatus(codes: readonly ErrorCode[]): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERROR_CODES[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return byStatus;
}

function parameters(route: Contract): Json[] {
  const params: Json[] = [];
  if (route.query) {
    const { properties, required } = toJsonSchema(route.query, { target: "draft-2020-12", ...REQUEST_OPTIONS }) as {
      properties?: Record<string, Json>;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(properties ?? {})) {
      params.push({ name, in: "query", required: required?.includes(name) ?? false, schema });
    }
  }
  for (const header of route.headers ?? []) {
    params.push({
      name: header.name,
      in: "header",
      required: header.required,
      description: header.description,
      schema: { type: "string" },
    });
  }
  return params;
}

function responses(route: Contract): Json {
  const out: Json = {};
  for (const [status, response] of Object.entries(route.responses)) {
    out[status] = {
      description: response.description,
      ...(response.headers
        ? {
            headers: Object.fromEntries(
              Object.entries(response.headers).map(([name, description]) => [
                name,
                { description, schema: { type: "string" } },
              ]),
            ),
          }
        : {}),
      ...(response.schema
        ? {
            content: {
              [response.contentType ?? "application/json"]: { schema: resolver(response.schema, RESPONSE_OPTIONS) },
            },
          }
        : {}),
    };
  }
  const codes = [...route.problems, ...(route.scope ? COMMON_PROBLEMS : KEYLESS_PROBLEMS)];
  for (const [status, group] of problemsByStatus(codes)) {
    out[String(status)] = {
      description: `${STATUS_TEXT[status] ?? "Error"}: ${group.map((code) => `\`${code}\` (${ERROR_TITLES[code]})`).join(", ")}`,
      ...(status === 409 || status === 429 || status === 503
        ? { headers: { "Retry-After": { description: "Seconds to wait", schema: { type: "integer" } } } }
        : {}),
      content: {
        "application/problem+json": {
          schema: { allOf: [{ $ref: "#/components/schemas/Problem" }, { properties: { code: { enum: group } } }] },
        },
      },
    };
  }
  return out;
}

/** getNotificationsById: stable across versions, so the /api/v1 prefix is left out of it. */
const operationId = (route: { method: string; path: string }) =>
  `${route.method.toLowerCase()}${route.path
    .replace(/^\/api\/v\d+/, "")
    .replace(/:(\w+)/g, "By_$1")
    .replace(/[^A-Za-z0-9]+(\w)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())}`;

/**
 * The route's OpenAPI description, as a middleware that hono-openapi finds on the route, and
 * the route's scope check: with a `scope` it answers 401 without a key and 403 with a key that
 * lacks it (requireScope), else it passes the request on. Either way without the async frame
 * describeRoute's own middleware adds to every request; the description travels on it as
 * describeRoute's properties.
 */
export function contract(route: Contract): MiddlewareHandler {
  const described = describeRoute({
    operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [route.tag],
    security: route.scope ? [{ apiKey: [] }, { bearer: [] }] : [],
    ...(route.scope ? { "x-scope": route.scope } : {}),
    parameters: parameters(route),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: resolver(route.body, REQUEST_OPTIONS) } },
          },
        }
      : {}),
    responses: responses(route),
  } as unknown as Parameters<typeof describeRoute>[0]);
  // The scope documented is the scope enforced: one statement of it per route, and one frame.
  const guard: MiddlewareHandler = route.scope === null ? (_c, next) => next() : requireScope(route.scope);
  Object.defineProperty(guard, "name", { value: described.name, configurable: true });
  return Object.assign(guard, described);
}

const problemSchema = (): Json => ({
  type: "object",
  description: "RFC 9457 problem details. `code` is stable and machine-readable; `status` equals the HTTP status.",
  required: ["type", "title", "status", "detail", "code"],
  properties: {
    type: { type: "string", format: "uri", examples: [`${PROBLEM_TYPE_BASE}validation_failed`] },
    title: { type: "string" },
    status: { type: "integer" },
    detail: { type: "string" },
    code: { type: "string", enum: Object.keys(ERROR_CODES) },
    instance: { type: "string" },
    request_id: { type: "string" },
    errors: {
      type: "array",
      description: "Every invalid field, on 400 answers.",
      items: {
        type: "object",
        required: ["field", "message"],
        properties: { field: { type: "string" }, message: { type: "string" } },
      },
    },
  },
});

/** The OpenAPI 3.1 document of /api/v1, generated from the contracts on the app's routes. */
export async function openApiDocument<E extends Env>(
  app: Hono<E>,
  options: { version: string; serverUrl?: string },
): Promise<Json> {
  return (await generateSpecs(app as unknown as Hono, {
    // /openapi.json is an operation of its own, not a static file to leave out.
    excludeStaticFile: false,
    documentation: {
      info: {
        title: "notify API",
        version: options.version,
        description:
          "Self-hosted notification service: POST notifications, read their per-channel status, manage preferences, templates and API keys. Every error is application/problem+json (RFC 9457).",
      },
      ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : {}),
      // What the service posts to a client's webhook endpoints (OpenAPI 3.1's webhooks).
      webhooks: webhookOperations() as never,
      components: {
        schemas: { Problem: problemSchema() } as never,
        securitySchemes: {
          apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
          bearer: { type: "http", scheme: "bearer", description: "The same API key as a bearer token" },
        },
      },
    },
  })) as unknown as Json;
}
