import { type AppError, ERROR_TITLES, type ErrorCode, type FieldError } from "@notify/core";

export const PROBLEM_TYPE_BASE = "https://notify.dev/problems/";

/** RFC 9457 problem details. `status` always equals the HTTP status; `code` is stable. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  instance?: string;
  request_id?: string;
  errors?: FieldError[];
}

export function toProblem(error: AppError, requestId?: string, instance?: string): Problem {
  const internal = error.status >= 500;
  return {
    type: `${PROBLEM_TYPE_BASE}${error.code}`,
    title: ERROR_TITLES[error.code],
    status: error.status,
    // 5xx details stay in the log: a problem body never carries internals.
    detail: internal ? ERROR_TITLES[error.code] : error.message,
    code: error.code,
    ...(instance ? { instance } : {}),
    ...(requestId ? { request_id: requestId } : {}),
    ...(error.fields && !internal ? { errors: error.fields } : {}),
  };
}

export const problemResponse = (problem: Problem, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(problem), {
    status: problem.status,
    headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...headers },
  });
