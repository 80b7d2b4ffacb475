import type { Server } from "node:http";
import type { Http2SecureServer, Http2Server } from "node:http2";
import { type ServerType, serve } from "@hono/node-server";
import type { Hono } from "hono";

export interface ServedApp {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Serves a sandbox's Hono app on a real socket, so the real SDKs can talk to it. `createServer`
 * and `serverOptions` switch it to HTTPS (the Web Push sandbox).
 */
export async function serveApp(
  app: Hono,
  options: { port?: number; host: string; https?: { key: string; cert: string } },
): Promise<ServedApp> {
  const { createServer } = await import(options.https ? "node:https" : "node:http");
  const { server, port } = await new Promise<{ server: ServerType; port: number }>((resolve, reject) => {
    const server = serve(
      {
        fetch: app.fetch,
        port: options.port ?? 0,
        hostname: options.host,
        createServer,
        ...(options.https ? { serverOptions: options.https } : {}),
      },
      (info) => resolve({ server, port: info.port }),
    );
    server.once("error", reject);
  });
  const closable = server as Server | Http2Server | Http2SecureServer;
  keepConnections(closable as Server);
  return {
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        closable.close((error) => (error ? reject(error) : resolve()));
        // Held (delayed) requests would otherwise keep close() waiting for their sockets.
        if ("closeAllConnections" in closable) closable.closeAllConnections();
      }),
  };
}

/**
 * Idle keep-alive connections are kept for 65 s, as providers' front ends do (Node's own 5 s
 * equals its client's idle timeout: a request sent on a connection the server is closing at that
 * instant meets ECONNRESET, which a sender must take as "maybe sent").
 */
export function keepConnections(server: Server): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
}
