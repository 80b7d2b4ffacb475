import type { Scope } from "@notify/core";
import { ERROR_CODES, type ErrorCode } from "@notify/core";
import type * as v from "valibot";

type Schema = v.GenericSchema;

export interface ResponseDoc {
  description: string;
  schema?: Schema;
  /** application/json unless given. */
  contentType?: string;
  headers?: Record<string, string>;
}

/**
 * One operation of the public API, described next to the valibot schemas its handler
 * validates with, so that the OpenAPI document cannot drift from what the handler accepts.
 */
export interface RouteDoc {
  method: "get" | "post" | "put" | "patch" | "delete";
  /** Path under /api/v1, OpenAPI style: /notifications/{id}. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /** null: no API key needed. */
  scope: Scope | null;
  body?: Schema;
  query?: Schema;
  headers?: Array<{ name: string; required: boolean; description: string }>;
  responses: Record<number, ResponseDoc>;
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

/** Problem codes grouped by their HTTP status, for the responses of one operation. */
export function problemsByStatus(codes: readonly ErrorCode[]): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERROR_CODES[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return byStatus;
}
