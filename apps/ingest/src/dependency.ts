import { AppError } from "@notify/core";

/**
 * Turns a failure to reach Postgres or NATS into a retryable 503. A Postgres error with a
 * SQLSTATE outside the connection classes is a bug or a constraint, not an outage: it stays
 * a 500 so it is noticed.
 */
export function asDependencyError(error: unknown, what: "postgres" | "nats"): AppError {
  if (error instanceof AppError) return error;
  // Only a PostgresError carries a SQLSTATE; a system error code (EPIPE, ECONNRESET) is an outage.
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  const sqlState = name === "PostgresError" && typeof code === "string" ? code : undefined;
  const outage = sqlState === undefined || /^(08|53|57|58)/.test(sqlState);
  return outage
    ? new AppError("dependency_unavailable", `${what} is unavailable`, {
        cause: error,
        context: { retryAfterSeconds: 1 },
      })
    : new AppError("internal", `${what} error`, { cause: error });
}
