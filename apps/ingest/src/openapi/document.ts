import { ERROR_CODES, ERROR_TITLES, type ErrorCode } from "@notify/core";
import { PROBLEM_TYPE_BASE } from "@notify/http";
import { toJsonSchema } from "@valibot/to-json-schema";
import type * as v from "valibot";
import { COMMON_PROBLEMS, problemsByStatus, type RouteDoc } from "./registry.js";

type Json = Record<string, unknown>;

/** JSON Schema 2020-12 (OpenAPI 3.1's dialect) of what a request may send. */
const schemaOf = (schema: v.GenericSchema): Json => {
  const { $schema: _, ...json } = toJsonSchema(schema, {
    target: "draft-2020-12",
    typeMode: "input",
    errorMode: "ignore",
  }) as Json;
  return json;
};

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

function parameters(route: RouteDoc): Json[] {
  const params: Json[] = [];
  for (const match of route.path.matchAll(/\{(\w+)\}/g)) {
    params.push({ name: match[1], in: "path", required: true, schema: { type: "string" } });
  }
  if (route.query) {
    const query = schemaOf(route.query) as { properties?: Record<string, Json>; required?: string[] };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      params.push({ name, in: "query", required: query.required?.includes(name) ?? false, schema });
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

function responses(route: RouteDoc): Json {
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
        ? { content: { [response.contentType ?? "application/json"]: { schema: schemaOf(response.schema) } } }
        : {}),
    };
  }
  const codes: ErrorCode[] = [
    ...route.problems,
    ...(route.scope ? COMMON_PROBLEMS : (["validation_failed", "version_sunset", "internal"] as ErrorCode[])),
  ];
  for (const [status, group] of problemsByStatus(codes)) {
    out[String(status)] = {
      description: `${STATUS_TEXT[status] ?? "Error"}: ${group.map((code) => `\`${code}\` (${ERROR_TITLES[code]})`).join(", ")}`,
      ...(status === 429 || status === 503
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

/** The OpenAPI 3.1 document of /api/v1, built from the routes' own valibot schemas. */
export function buildOpenApi(routes: readonly RouteDoc[], options: { version: string; serverUrl?: string }): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = `/api/v1${route.path}`;
    const item = paths[path] ?? {};
    paths[path] = item;
    item[route.method] = {
      operationId: `${route.method}${route.path.replace(/\{(\w+)\}/g, "By_$1").replace(/[^A-Za-z0-9]+(\w)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())}`,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      security: route.scope ? [{ apiKey: [] }, { bearer: [] }] : [],
      ...(route.scope ? { "x-scope": route.scope } : {}),
      parameters: parameters(route),
      ...(route.body
        ? { requestBody: { required: true, content: { "application/json": { schema: schemaOf(route.body) } } } }
        : {}),
      responses: responses(route),
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "notify API",
      version: options.version,
      description:
        "Self-hosted notification service: POST notifications, read their per-channel status, manage preferences, templates and API keys. Every error is application/problem+json (RFC 9457).",
    },
    ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : {}),
    paths,
    components: {
      schemas: { Problem: problemSchema() },
      securitySchemes: {
        apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
        bearer: { type: "http", scheme: "bearer", description: "The same API key as a bearer token" },
      },
    },
  };
}
