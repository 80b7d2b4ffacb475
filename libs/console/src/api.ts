/**
 * The console's only way to data: the public HTTP API, called in-process with the signed-in
 * operator's key, so authentication, scopes, rate limits and validation are exactly what a script
 * calling the API gets. Nothing here reads Postgres or NATS.
 */
export interface PublicApi {
  request(path: string, init?: RequestInit): Response | Promise<Response>;
}

/** An API problem (RFC 9457), as much of it as the console shows. */
export interface ApiProblem {
  status: number;
  title: string;
  detail?: string;
  code?: string;
  retryAfter?: string;
}

export type ApiResult<T> = { ok: true; status: number; body: T } | { ok: false; problem: ApiProblem };

/** The key was refused (unknown, revoked, or no longer an operator's): the session ends. */
export class KeyRefused extends Error {
  constructor(readonly problem: ApiProblem) {
    super("the API refused the console's key");
  }
}

export interface ApiClient {
  get<T>(path: string, query?: Record<string, string | undefined>): Promise<ApiResult<T>>;
  post<T>(path: string, body?: unknown): Promise<ApiResult<T>>;
  put<T>(path: string, body?: unknown): Promise<ApiResult<T>>;
  /** A 204 answers a null body. */
  delete<T = null>(path: string, query?: Record<string, string | undefined>): Promise<ApiResult<T>>;
}

/** The query string of the values given, without the empty ones. */
export function queryString(query: Record<string, string | undefined> = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== "") params.set(name, value);
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}

async function problemOf(response: Response): Promise<ApiProblem> {
  const problem: ApiProblem = { status: response.status, title: response.statusText || `HTTP ${response.status}` };
  const retryAfter = response.headers.get("retry-after");
  if (retryAfter !== null) problem.retryAfter = retryAfter;
  try {
    const body = (await response.json()) as Record<string, unknown>;
    if (typeof body.title === "string") problem.title = body.title;
    if (typeof body.detail === "string") problem.detail = body.detail;
    if (typeof body.code === "string") problem.code = body.code;
  } catch {
    // Not problem+json: the status says enough.
  }
  return problem;
}

/**
 * A client bound to one key. A 401 or 403 throws KeyRefused (every route the console uses needs
 * `operator`, so either means the key no longer opens them); any other error is answered as a
 * problem for the page to show. `requestId` goes along so the API's log line joins the console's.
 */
export function apiClient(api: PublicApi, key: string, requestId?: string): ApiClient {
  const call = async <T>(path: string, init: RequestInit): Promise<ApiResult<T>> => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${key}`);
    headers.set("accept", "application/json");
    if (requestId !== undefined) headers.set("x-request-id", requestId);
    let response: Response;
    try {
      response = await api.request(`/api/v1${path}`, { ...init, headers });
    } catch {
      // The API answers every error itself; a throw here is a bug, shown as an outage, never a stack.
      return { ok: false, problem: { status: 500, title: "Internal error", detail: "the API call failed" } };
    }
    if (response.ok) {
      return { ok: true, status: response.status, body: (response.status === 204 ? null : await response.json()) as T };
    }
    const problem = await problemOf(response);
    if (response.status === 401 || response.status === 403) throw new KeyRefused(problem);
    return { ok: false, problem };
  };
  const send = <T>(method: string, path: string, body: unknown) =>
    call<T>(path, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
    });
  return {
    get: (path, query) => call(`${path}${queryString(query)}`, { method: "GET" }),
    post: (path, body) => send("POST", path, body),
    put: (path, body) => send("PUT", path, body),
    delete: (path, query) => call(`${path}${queryString(query)}`, { method: "DELETE" }),
  };
}
