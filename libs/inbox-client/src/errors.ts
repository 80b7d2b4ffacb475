/** An RFC 9457 problem document, as every error answer of the notify API carries one. */
export interface Problem {
  type?: string;
  title?: string;
  detail?: string;
  /** Stable and machine-readable, e.g. "rate_limited", "unauthenticated", "not_found". */
  code?: string;
  [k: string]: unknown;
}

/** An answer of the notify API that is not a success: its status, problem and Retry-After. */
export class InboxApiError extends Error {
  override readonly name = "InboxApiError";
  readonly status: number;
  readonly problem: Problem;
  /** From Retry-After (seconds, or an HTTP date), on 429 and 503 answers. */
  readonly retryAfterSeconds?: number;

  constructor(status: number, problem: Problem, retryAfterSeconds?: number) {
    super(problem.detail ?? problem.title ?? `the notify API answered ${status}`);
    this.status = status;
    this.problem = problem;
    if (retryAfterSeconds !== undefined) this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** Retry-After as seconds from now: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterSeconds(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === "") return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** The error for a non-success answer whose body (when problem+json or JSON) was `body`. */
export function apiError(response: Response, body: unknown): InboxApiError {
  const problem: Problem =
    typeof body === "object" && body !== null && !Array.isArray(body)
      ? (body as Problem)
      : { title: response.statusText || `HTTP ${response.status}` };
  return new InboxApiError(response.status, problem, retryAfterSeconds(response.headers.get("retry-after")));
}
