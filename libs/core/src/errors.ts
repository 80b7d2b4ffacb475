/**
 * One error type for the whole service. `code` is a closed union, stable and machine-readable:
 * it is what HTTP problem bodies carry and what callers branch on. Never branch on messages.
 */
export const ERROR_CODES = {
  validation_failed: 400,
  malformed_json: 400,
  idempotency_key_missing: 400,
  idempotency_key_invalid: 400,
  unknown_template: 400,
  template_data_invalid: 400,
  invalid_request: 400,
  invalid_cursor: 400,
  unauthenticated: 401,
  invalid_api_key: 401,
  insufficient_scope: 403,
  not_found: 404,
  version_sunset: 410,
  idempotency_key_in_use: 409,
  notification_not_routed: 409,
  idempotency_key_reused: 422,
  template_invalid: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  dependency_unavailable: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

export interface FieldError {
  /** JSON pointer-like dotted path of the offending field, e.g. "data.name". */
  field: string;
  message: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly fields: FieldError[] | undefined;
  readonly context: Record<string, unknown> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { cause?: unknown; fields?: FieldError[]; retryable?: boolean; context?: Record<string, unknown> } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.status = ERROR_CODES[code];
    this.retryable = options.retryable ?? code === "dependency_unavailable";
    this.fields = options.fields;
    this.context = options.context;
  }
}

export const isAppError = (error: unknown): error is AppError => error instanceof AppError;

/** Stable titles per code, as RFC 9457 wants `title` to be stable per problem type. */
export const ERROR_TITLES: Record<ErrorCode, string> = {
  validation_failed: "The request is invalid",
  malformed_json: "The request body is not valid JSON",
  idempotency_key_missing: "Idempotency-Key header is required",
  idempotency_key_invalid: "Idempotency-Key header is malformed",
  unknown_template: "Unknown template",
  template_data_invalid: "Data does not fit the template",
  invalid_request: "Invalid request",
  invalid_cursor: "The cursor is not valid for this list",
  unauthenticated: "Authentication required",
  invalid_api_key: "Invalid API key",
  insufficient_scope: "The API key lacks a required scope",
  not_found: "Not found",
  version_sunset: "This API version is past its sunset date",
  idempotency_key_in_use: "A request with this Idempotency-Key is in progress",
  notification_not_routed: "The notification is not routed yet",
  idempotency_key_reused: "Idempotency-Key reused with a different request",
  template_invalid: "The template is outside the allowed template language",
  payload_too_large: "Request body too large",
  unsupported_media_type: "Unsupported media type",
  rate_limited: "Too many requests",
  internal: "Internal server error",
  dependency_unavailable: "Service temporarily unavailable",
};
