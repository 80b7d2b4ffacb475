import type { AppError } from "@notify/core";
import { toAppError } from "@notify/http";

/**
 * Turns a failure of a Postgres or NATS call into the AppError it answers as. The decision is
 * libs/http's `toAppError`, the one every app's onError makes: an unreachable, overloaded or
 * timed-out dependency is a retryable 503; a Postgres error outside the transient SQLSTATEs, or
 * anything that is not a dependency failure at all, is a bug and stays a 500 so it is noticed.
 * Call sites keep it where they need the AppError itself (to log it, or to reject a batch).
 */
export const asDependencyError = (error: unknown, _dependency: "postgres" | "nats"): AppError => toAppError(error);
