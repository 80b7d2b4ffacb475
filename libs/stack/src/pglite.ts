import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

/**
 * PGlite (Postgres compiled to WASM) behind its wire-protocol socket server, so every app
 * talks to it with postgres.js exactly as to a real server. The socket server multiplexes
 * connections onto PGlite's single session and keeps a transaction's queries together.
 * Development only: one process, one core.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  port: number,
  maxConnections = 64,
): Promise<EmbeddedPostgres> {
  mkdirSync(dataDir, { recursive: true });
  const db = await PGlite.create(dataDir);
  const server = new PGLiteSocketServer({ db, port, host: "127.0.0.1", maxConnections });
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      await server.stop();
      await db.close();
    },
  };
}
