import { type ServerType, serve } from "@hono/node-server";
import type { Logger } from "@notify/log";

export interface HttpServer {
  server: ServerType;
  port: number;
  close(): Promise<void>;
}

/**
 * How long a client may take, against slow clients holding sockets open (slowloris): the
 * request head, the whole request (head and body; a streamed answer is not bound by it), and an
 * idle keep-alive connection between requests.
 */
export interface ServerTimeouts {
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
}

export const DEFAULT_SERVER_TIMEOUTS: Required<ServerTimeouts> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/**
 * Serves a Hono app and resolves once it listens (port 0 picks a free port); rejects when it
 * cannot (the port taken, the address not this machine's).
 */
export function listen(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  port: number,
  host = "0.0.0.0",
  timeouts: ServerTimeouts = {},
): Promise<HttpServer> {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = { ...DEFAULT_SERVER_TIMEOUTS, ...timeouts };
  // Node refuses a head timeout above the request timeout; 0 (no limit) is only honoured for both.
  const requestTimeout = requestTimeoutMs;
  const headersTimeout = requestTimeout === 0 ? headersTimeoutMs : Math.min(headersTimeoutMs, requestTimeout);
  const serverOptions = {
    headersTimeout,
    requestTimeout,
    // How often Node looks for sockets past those timeouts (30 s by default, longer than the timeouts).
    connectionsCheckingInterval: Math.max(
      100,
      Math.min(1000, ...[headersTimeout, requestTimeout].filter((ms) => ms > 0).map((ms) => ms / 2)),
    ),
  };
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: host, serverOptions }, (info) => {
      server.off("error", reject);
      (server as unknown as { keepAliveTimeout: number }).keepAliveTimeout = keepAliveTimeoutMs;
      resolve({
        server,
        port: info.port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Idle keep-alive sockets would hold close() open until they time out.
            (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
          }),
      });
    });
    server.once("error", reject);
  });
}

/**
 * An app started by its `start` function: what its process's entry (or the one process that runs
 * all four apps) needs to stop it on a signal.
 */
export interface RunningApp {
  log: Logger;
  /** How long its stop may take before the process gives up and exits 1. */
  shutdownTimeoutMs: number;
  /** Stops taking work, finishes what is in hand, closes its servers and connections. */
  stop(): Promise<void>;
}

/**
 * What an app's start has opened so far (connections, servers, background work), closed newest
 * first when the start fails part-way: with the four apps in one process, the process lives on
 * to stop the apps already running.
 */
export function startScope() {
  const closers: Array<() => unknown> = [];
  return {
    /** Answers `value`, to be closed with `close` if the start fails. */
    add<T>(value: T, close: (value: T) => unknown): T {
      closers.push(() => close(value));
      return value;
    },
    /** Closes what was added, newest first; a close that fails does not keep the others open. */
    async close(): Promise<void> {
      for (let close = closers.pop(); close !== undefined; close = closers.pop()) {
        try {
          await close();
        } catch {
          // The start's own error is the one reported.
        }
      }
    },
  };
}

/**
 * Runs `stop` once on SIGTERM or SIGINT and exits 0 when it finishes, or 1 when it takes
 * longer than the timeout. One place per process registers shutdown.
 */
export function onShutdown(log: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      log.error({ timeoutMs }, "shutdown timed out");
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    stop().then(
      () => {
        log.info("stopped");
        process.exit(0);
      },
      (error: unknown) => {
        log.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => handler("SIGTERM"));
  process.once("SIGINT", () => handler("SIGINT"));
}
