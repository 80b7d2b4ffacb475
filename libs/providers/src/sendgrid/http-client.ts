import { Client } from "@sendgrid/client";
import { Agent, type Dispatcher, EnvHttpProxyAgent } from "undici";

/** How long a connection is kept idle between sends, as Node's own agent keeps one. */
export const IDLE_MS = 5_000;

/** What SendGrid answered when it was not a 2xx: the status, its headers and its (parsed) body. */
export class SendgridResponseError extends Error {
  override name = "SendgridResponseError";
  constructor(
    readonly code: number,
    readonly response: { headers: Record<string, unknown>; body: unknown },
  ) {
    super(`sendgrid answered ${code}`);
  }
}

/**
 * The exchange ended without a whole answer: `code` says how (undici's, such as
 * UND_ERR_CONNECT_TIMEOUT or UND_ERR_SOCKET, or the socket's, such as ECONNREFUSED).
 */
export class SendgridTransportError extends Error {
  override name = "SendgridTransportError";
  readonly code: string | undefined;
  constructor(cause: unknown) {
    const { code, message, cause: inner } = (cause ?? {}) as { code?: unknown; message?: unknown; cause?: unknown };
    const innerCode = (inner as { code?: unknown } | undefined)?.code;
    super(typeof message === "string" && message !== "" ? message : String(cause), { cause });
    this.code = typeof code === "string" ? code : typeof innerCode === "string" ? innerCode : undefined;
  }
}

/** The request @sendgrid/client builds (createRequest), in the form it hands to axios. */
interface BuiltRequest {
  baseURL?: string;
  url?: string;
  method?: string;
  headers?: Record<string, string>;
  data?: unknown;
  params?: Record<string, string>;
}

/** @sendgrid/client's answer: the response (status, headers, body) and the body again. */
type Answer = Awaited<ReturnType<Client["request"]>>;

/** axios's joining of a base URL and a path: a base URL's own path is kept. */
function urlOf(request: BuiltRequest): string {
  const base = (request.baseURL ?? "").replace(/\/+$/, "");
  const path = (request.url ?? "").replace(/^\/+/, "");
  const query = request.params === undefined ? "" : new URLSearchParams(request.params).toString();
  return `${path === "" ? base : `${base}/${path}`}${query === "" ? "" : `?${query}`}`;
}

const parsed = (text: string): unknown => {
  if (text === "") return "";
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/**
 * @sendgrid/client sending through undici instead of axios. The request is still the one the
 * client builds (its default request and headers, the API key's Authorization, its user agent),
 * and @sendgrid/mail builds the body; only the HTTP exchange changes, through the client's
 * public `request`. axios merges its configuration, normalises headers and wraps node:http for
 * every call: 400 µs of CPU per send here against 220 through undici (client only, 32 sends in
 * flight against the sandbox), the largest cost of a worker's send that does no work.
 *
 * The connections are the provider's own (no process-wide agent another package may change):
 * as many as sends in flight, none queued inside the process, each kept IDLE_MS idle (less when
 * the server announces less), TCP keep-alive at 60 s. Making one (name lookup, TCP, TLS) may
 * take `connectMs`; an answer must start and finish within `timeoutMs`, after which the socket
 * goes (the caller's deadline has answered by then). A request is never retried here: POST is
 * not idempotent, and an outcome the transport cannot tell is the caller's to classify. With
 * HTTP_PROXY, HTTPS_PROXY or NO_PROXY set, sends go through the proxy they name, as with axios.
 *
 * Answers as @sendgrid/client does: `[response, body]` for a 2xx; anything else rejects with
 * a SendgridResponseError (a redirect too: it is never followed); a transport failure rejects
 * with undici's or the socket's error, its `code` telling which.
 */
export class SendgridHttpClient extends Client {
  readonly #dispatcher: Dispatcher;

  constructor(options: { connectMs: number; timeoutMs: number; idleMs?: number }) {
    super();
    const agentOptions = {
      connect: { timeout: options.connectMs, keepAlive: true, keepAliveInitialDelay: 60_000 },
      keepAliveTimeout: options.idleMs ?? IDLE_MS,
      keepAliveMaxTimeout: options.idleMs ?? IDLE_MS,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    };
    const proxied = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"].some((name) => process.env[name]);
    this.#dispatcher = proxied ? new EnvHttpProxyAgent(agentOptions) : new Agent(agentOptions);
  }

  override async request(data: Parameters<Client["request"]>[0]): Promise<Answer> {
    const request = this.createRequest(data) as unknown as BuiltRequest;
    const target = new URL(urlOf(request));
    const { statusCode, headers, body } = await this.#dispatcher
      .request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: (request.method ?? "GET") as Dispatcher.HttpMethod,
        headers: request.headers ?? {},
        body: request.data === undefined ? null : JSON.stringify(request.data),
      })
      .catch((error: unknown) => {
        throw new SendgridTransportError(error);
      });
    const ok = statusCode >= 200 && statusCode < 300;
    // Once the status is in, it is the answer: a body cut short changes nothing of a 2xx (Mail
    // Send's 202 has none), and an error status keeps its headers.
    const answer = await body.text().then(parsed, () => (ok ? "" : undefined));
    if (!ok) throw new SendgridResponseError(statusCode, { headers, body: answer });
    return [{ statusCode, headers, body: answer as object }, answer];
  }

  /** Closes the idle connections; sends in flight finish first. */
  async close(): Promise<void> {
    await this.#dispatcher.close();
  }
}
