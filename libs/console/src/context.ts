import type { AppEnv, AttemptBudget, AttemptThrottle } from "@notify/http";
import type { Context } from "hono";
import type { ApiClient, PublicApi } from "./api.js";
import { type PageOptions, page } from "./layout.js";
import type { Session, SessionStore } from "./session.js";

/** What the console is built from (ingest's createAdminApp passes it on). */
export interface ConsoleOptions {
  /** The public app (ingest's createApp): the console calls its /api/v1 routes in-process. */
  api: PublicApi;
  /** The same failed-authentication budget per address as the API's: failed sign-ins spend it. */
  preauthThrottle: AttemptThrottle;
  /**
   * Whether a key is one the API can tell valid without a lookup (signed, or among the active
   * keys held in memory; ingest passes its key lookup's): such a key is never held back by the
   * budget, whatever others sent from the same address. Absent: every key is tried against it.
   */
  vouches?: (key: string) => boolean;
  /** A trace viewer's URL with {trace_id} in it (CONSOLE_TRACE_URL). */
  traceUrl?: string;
  /**
   * Browsers reach the console over https, through a TLS proxy (CONSOLE_TLS): the session
   * cookie is then Secure, with the __Host- prefix (session.ts sessionCookie).
   */
  tls?: boolean;
  /** Sessions (default: 1 h idle, 12 h absolute, 1000 at most). */
  sessions?: SessionStore;
}

/** Who is acting: a signed-in session, or a script presenting a Bearer operator key. */
export interface Operator {
  api: ApiClient;
  /** Undefined for a Bearer key: no session, no CSRF token (no cookie a third site could ride). */
  session?: Session;
  /** The cookie value, to end the session when the API refuses its key. */
  sessionId?: string;
  /** The address's failed-authentication budget (a Bearer key refused spends it). */
  budget: AttemptBudget;
}

export interface ConsoleEnv extends AppEnv {
  Variables: AppEnv["Variables"] & { operator: Operator };
}

export type ConsoleContext = Context<ConsoleEnv>;

/** A submitted form: repeated fields (the dead letters ticked) as arrays. */
export type Form = Record<string, string | File | (string | File)[]>;

/** The request's form, parsed once (Hono caches the first parse, whatever its options). */
export const formOf = (c: Context): Promise<Form> => c.req.parseBody({ all: true }) as Promise<Form>;

/** A form field as one string ("" when absent or a file). */
export function field(form: Form, name: string): string {
  const value = form[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === "string" ? first : "";
}

/** A form field's every value. */
export function fields(form: Form, name: string): string[] {
  const value = form[name];
  return (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter(
    (v): v is string => typeof v === "string",
  );
}

/**
 * Renders a page in the shell for the current operator: the sign-out form carries the
 * session's CSRF token, and a notice left by the previous action is shown once.
 */
export async function render(
  c: ConsoleContext,
  options: Omit<PageOptions, "csrf" | "notice">,
  status: PageStatus | 401 | 403 | 413 = 200,
): Promise<Response> {
  // No operator yet on the sign-in form and on refusals before authentication.
  const session = (c.get("operator") as Operator | undefined)?.session;
  const notice = session?.notice;
  if (session !== undefined) session.notice = undefined;
  return c.html(
    page({
      ...options,
      ...(session === undefined ? {} : { csrf: session.csrf }),
      ...(notice === undefined ? {} : { notice }),
    }),
    status,
  );
}

/** The hidden CSRF field of a POST form (empty for a Bearer key, which needs none). */
export const csrfOf = (c: ConsoleContext): string => (c.get("operator") as Operator | undefined)?.session?.csrf ?? "";

export type PageStatus = 200 | 400 | 404 | 409 | 422 | 429 | 500 | 503;

/** A page's status from an API problem's: the same class of answer, as a page. */
export function statusOf(problemStatus: number): PageStatus {
  if (problemStatus === 404 || problemStatus === 409 || problemStatus === 422) return problemStatus;
  if (problemStatus === 429 || problemStatus === 503) return problemStatus;
  return problemStatus >= 500 ? 500 : 400;
}
