import { Client } from "@sendgrid/client";
import { Agent, type Dispatcher, EnvHttpProxyAgent, util } from "undici";

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
 * UND_ERR_CONNECT_TIMEOUT or UND_ERR_SOCKET, or the socket's, such as ECONNREFUSED), and
 * `written` whether the request had been handed to a connected socket: until then nothing of
 * it can have reached SendGrid, whatever the code; after, it may have, whatever the code (an
 * established connection whose route dies reports EHOSTUNREACH, as a refused one does).
 */
export class SendgridTransportError extends Error {
  override name = "SendgridTransportError";
  readonly code: string | undefined;
  constructor(
    cause: unknown,
    readonly written: boolean,
  ) {
    const { code, message } = (cause ?? {}) as { code?: unknown; message?: unknown };
    super(typeof message === "string" && message !== "" ? message : String(cause), { cause });
    this.code = typeof code === "string" ? code : undefined;
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
 * every call, which would make it the largest cost of a worker's send outside the durable work.
 *
 * The connections are the provider's own (no process-wide agent another package may change):
 * as many as sends in flight, none queued inside the process, each kept IDLE_MS idle (less when
 * the server announces less), TCP keep-alive at 60 s. Making one (name lookup, TCP, TLS) may
 * take `connectMs`; an answer must start and finish within `timeoutMs`, after which the socket
 * goes (the caller's deadline has answered by then). A request is never retried here: POST is
 * not idempotent, and an outcome the transport cannot tell is the caller's to classify. With
 * a proxy named in the environment for the base URL's scheme (or ALL_PROXY), and NO_PROXY,
 * sends go through it, as they would through @sendgrid/client's own axios.
 *
 * Answers as @sendgrid/client does: `[response, body]` for a 2xx; anything else rejects with
 * a SendgridResponseError (a redirect too: it is never followed); a transport failure rejects
 * with a SendgridTransportError saying how, and whether the request had been written.
 */
export class SendgridHttpClient extends Client {
  readonly #options: { connectMs: number; timeoutMs: number; idleMs: number };
  /** One dispatcher per origin (a client speaks to one: its base URL's). */
  readonly #dispatchers = new Map<string, Dispatcher>();
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(options: { connectMs: number; timeoutMs: number; idleMs?: number }) {
    super();
    this.#options = { ...options, idleMs: options.idleMs ?? IDLE_MS };
  }

  #dispatcherFor(target: URL): Dispatcher {
    let dispatcher = this.#dispatchers.get(target.origin);
    if (dispatcher === undefined) {
      const { connectMs, timeoutMs, idleMs } = this.#options;
      const connect = { timeout: connectMs, keepAlive: true, keepAliveInitialDelay: 60_000 };
      const agentOptions = {
        connect,
        keepAliveTimeout: idleMs,
        keepAliveMaxTimeout: idleMs,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      };
      const proxy = proxyFor(target);
      dispatcher =
        proxy === undefined
          ? new Agent(agentOptions)
          : // The proxy for this origin's scheme only, NO_PROXY honoured: an https origin through
            // a CONNECT tunnel, made within the time of a direct connection; an http one asked of
            // the proxy by its whole URL, as axios did.
            new EnvHttpProxyAgent({
              ...agentOptions,
              httpProxy: proxy,
              httpsProxy: proxy,
              proxyTunnel: target.protocol === "https:",
              proxyTls: { timeout: connectMs },
              requestTls: { timeout: connectMs },
            } as ConstructorParameters<typeof EnvHttpProxyAgent>[0]);
      this.#dispatchers.set(target.origin, dispatcher);
    }
    return dispatcher;
  }

  override async request(data: Parameters<Client["request"]>[0]): Promise<Answer> {
    const request = this.createRequest(data) as unknown as BuiltRequest;
    const target = new URL(urlOf(request));
    const exchanged = exchange(this.#dispatcherFor(target), {
      origin: target.origin,
      path: `${target.pathname}${target.search}`,
      method: (request.method ?? "GET") as Dispatcher.HttpMethod,
      headers: request.headers ?? {},
      body: request.data === undefined ? null : JSON.stringify(request.data),
    });
    this.#inFlight.add(exchanged);
    const { statusCode, headers, text } = await exchanged.finally(() => this.#inFlight.delete(exchanged));
    const answer = parsed(text);
    if (statusCode < 200 || statusCode >= 300) {
      throw new SendgridResponseError(statusCode, { headers, body: answer });
    }
    return [{ statusCode, headers, body: answer as object }, answer];
  }

  /**
   * Closes the connections: sends in flight may finish within `graceMs`, then every socket goes
   * (an answer trickling in never holds a shutdown).
   */
  async close(graceMs = 1000): Promise<void> {
    const dispatchers = [...this.#dispatchers.values()];
    this.#dispatchers.clear();
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    // Waited for here rather than by the dispatchers' close(): once closed, undici's destroy()
    // does not end a request in flight.
    await Promise.race([Promise.allSettled(this.#inFlight), grace]);
    clearTimeout(timer);
    await Promise.all(dispatchers.map((d) => d.destroy()));
  }
}

/**
 * The proxy the environment names for `target`, as axios chose it (proxy-from-env): the
 * scheme's own variable, else ALL_PROXY; none when NO_PROXY covers the host (EnvHttpProxyAgent
 * checks that per request).
 */
function proxyFor(target: URL): string | undefined {
  const env = process.env;
  const own = target.protocol === "https:" ? (env.https_proxy ?? env.HTTPS_PROXY) : (env.http_proxy ?? env.HTTP_PROXY);
  return own || env.all_proxy || env.ALL_PROXY || undefined;
}

/**
 * One HTTP exchange through undici's dispatch interface, whose handler hears when the request
 * is handed to a connected socket (onConnect, right before its first byte is written): a
 * failure before that is marked as never written. Once the status is in, it is the answer: a
 * body cut short changes nothing of a 2xx (Mail Send's 202 has none), and an error status keeps
 * its headers.
 */
function exchange(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
): Promise<{ statusCode: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    let written = false;
    let statusCode = 0;
    let headers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    const answered = () => resolve({ statusCode, headers, text: Buffer.concat(chunks).toString("utf8") });
    dispatcher.dispatch(options, {
      onConnect() {
        written = true;
      },
      onHeaders(status: number, rawHeaders: Buffer[]) {
        statusCode = status;
        headers = util.parseHeaders(rawHeaders) as Record<string, unknown>;
        return true;
      },
      onData(chunk: Buffer) {
        chunks.push(chunk);
        return true;
      },
      onComplete() {
        answered();
      },
      onError(error: Error) {
        if (statusCode !== 0) answered();
        else reject(new SendgridTransportError(error, written));
      },
    } as Dispatcher.DispatchHandler);
  });
}
