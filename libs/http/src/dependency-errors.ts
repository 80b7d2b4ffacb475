import { judgeNatsError } from "@notify/bus";
import { AppError, isAppError } from "@notify/core";

/**
 * What was out of reach: Postgres (postgres.js said so), NATS (the nats.js client said so), or
 * the network under a client that passed the socket's own error through (postgres.js does).
 */
export type Dependency = "postgres" | "nats" | "network";

/** Retry-After of a 503 for an unreachable dependency: reconnects take about this long. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 1;

/** Socket errors: the peer is down, unreachable, not resolvable (yet), or the link broke. */
const SYSTEM_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
]);

/** postgres.js's own codes for a connection that closed, was destroyed, ended or never opened. */
const POSTGRES_JS_CODES: ReadonlySet<string> = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
  "CONNECT_TIMEOUT",
]);

/**
 * SQLSTATEs worth a retry: the classes 08 (connection exception), 53 (insufficient resources:
 * too many connections, out of memory or disk), 57 (operator intervention: 57014 statement
 * timeout or cancel, 57P01 admin shutdown, 57P03 cannot connect now) and 58 (system error), and
 * the conflicts a repeat resolves: 40001 serialization failure, 40P01 deadlock, 55P03 lock not
 * available. Everything else (42xxx a broken query, 23xxx a constraint, 22xxx bad data) is a bug.
 */
const transientSqlState = (code: string) =>
  /^(08|53|57|58)/.test(code) || code === "40001" || code === "40P01" || code === "55P03";
const SQLSTATE = /^[0-9A-Z]{5}$/;

type Verdict = Dependency | "bug" | "unknown";

/** One error object on its own, without its cause. */
function judge(error: object): Verdict {
  const { name, code } = error as { name?: unknown; code?: unknown };
  if (name === "PostgresError" && typeof code === "string" && SQLSTATE.test(code)) {
    return transientSqlState(code) ? "postgres" : "bug";
  }
  if (typeof code === "string") {
    if (POSTGRES_JS_CODES.has(code)) return "postgres";
    // postgres.js rejects a query it cancels with a plain Error carrying 57014.
    if (/^\d\d[0-9A-Z]{3}$/.test(code) && transientSqlState(code)) return "postgres";
    if (SYSTEM_CODES.has(code)) return "network";
  }
  // NATS's own errors are told apart in libs/bus, which alone knows the client's classes.
  const nats = judgeNatsError(error);
  if (nats !== "unknown") return nats === "outage" ? "nats" : "bug";
  return "unknown";
}

// Wrappers (drizzle's DrizzleQueryError, RequestError, JetStreamNotEnabled, AggregateError of
// happy eyeballs) put the telling error in `cause` or `errors`; a few levels always suffice.
const MAX_LOOKED_AT = 32;

/**
 * Which dependency an error says is unreachable, overloaded or timed out, or null when it says
 * nothing of the kind: a bug, a constraint, a configuration problem, or a value that is not
 * even an Error. Walks `cause` and an AggregateError's `errors` breadth first; the first error
 * with a verdict decides. Never throws, whatever was thrown: matching is by class and stable
 * code only, never by message text.
 */
export function unavailableDependency(error: unknown): Dependency | null {
  try {
    const queue: unknown[] = [error];
    const seen = new Set<object>();
    while (queue.length > 0 && seen.size < MAX_LOOKED_AT) {
      const current = queue.shift();
      if (current === null || typeof current !== "object" || seen.has(current)) continue;
      seen.add(current);
      const verdict = judge(current);
      if (verdict === "bug") return null;
      if (verdict !== "unknown") return verdict;
      const { cause, errors } = current as { cause?: unknown; errors?: unknown };
      if (cause !== undefined) queue.push(cause);
      if (Array.isArray(errors)) queue.push(...errors.slice(0, MAX_LOOKED_AT));
    }
  } catch {
    // A value that throws when looked at (a revoked Proxy, a throwing getter) says nothing.
  }
  return null;
}

/**
 * How loudly to log a failure whose work is retried: a warning when a dependency was out of reach
 * or timed out (it heals by itself and the work comes back), an error otherwise (a fault to fix).
 */
export const retryLogLevel = (error: unknown): "warn" | "error" =>
  unavailableDependency(error) === null ? "error" : "warn";

const safely = (check: () => boolean) => {
  try {
    return check();
  } catch {
    return false;
  }
};

/**
 * The AppError an error answers as, in every app's onError: an AppError as it is; a failure to
 * reach a dependency a retryable 503 dependency_unavailable with Retry-After (the body stays
 * generic, the cause goes to the log); anything else a 500 internal, to be noticed and fixed.
 */
export function toAppError(error: unknown): AppError {
  if (safely(() => isAppError(error))) return error as AppError;
  const dependency = unavailableDependency(error);
  if (dependency !== null) {
    return new AppError("dependency_unavailable", `${dependency} is unavailable`, {
      cause: error,
      context: { dependency, retryAfterSeconds: DEPENDENCY_RETRY_AFTER_SECONDS },
    });
  }
  return new AppError("internal", "unexpected error", { cause: error });
}
