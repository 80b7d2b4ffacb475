import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, mkdirSync } from "node:fs";
import { connect } from "node:net";
import { delimiter, join } from "node:path";
import { guardChild } from "./guardian.js";
import { isProcessOf, processAlive, readPidFile, stopProcess } from "./pids.js";

/** Whether something accepts TCP connections at host:port. */
export function tcpAnswers(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export function findNatsServer(explicit?: string): string | null {
  const candidates = explicit
    ? [explicit]
    : [
        ...(process.env.PATH ?? "").split(delimiter).map((dir) => join(dir, "nats-server")),
        "/usr/sbin/nats-server",
        "/usr/local/bin/nats-server",
      ];
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return null;
}

/**
 * What to do when no nats-server is found, for the stack (NATS_URL unset) or for the tests
 * (TEST_NATS_URL names no NATS that serves them): install one, or point the variable at a
 * running server.
 */
export function natsInstallHelp(variable: "NATS_URL" | "TEST_NATS_URL" = "NATS_URL"): string {
  const situation =
    variable === "NATS_URL"
      ? "NATS_URL is not set"
      : "no NATS with JetStream answers at TEST_NATS_URL (or its default)";
  return (
    `No nats-server was found, and ${situation}. Install one (Debian/Ubuntu: \`sudo apt-get install nats-server\`; ` +
    "macOS: `brew install nats-server`; or `go install github.com/nats-io/nats-server/v2@latest`), " +
    `or set NATS_SERVER_BIN to the binary, or point ${variable} at a running server with JetStream enabled (\`nats-server -js\`).`
  );
}

export const NATS_INSTALL_HELP = natsInstallHelp();

export interface LocalNats {
  url: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

/** The store of the stack's own nats-server under the data folder. */
export const natsStoreDir = (dataDir: string) => join(dataDir, "nats");

/**
 * The stack's own nats-server with JetStream: loopback, the given port, its store under the data
 * folder. A server of an earlier run still holding the store (its supervisor was killed) is
 * stopped first: two servers on one store would corrupt it.
 */
export async function startLocalNats(options: {
  dataDir: string;
  port: number;
  binary?: string;
  logFile: string;
  /** A configuration file (users, permissions); the flags here still set address, port and store. */
  configFile?: string;
  /** The server's environment: a configuration file's `$VARIABLE`s are read from it. */
  env?: Record<string, string>;
  /** A node of a JetStream cluster: its name, its route port and the other nodes' routes. */
  cluster?: { name: string; serverName: string; port: number; routes: string[] };
}): Promise<LocalNats> {
  const bin = findNatsServer(options.binary);
  if (!bin) throw new Error(NATS_INSTALL_HELP);
  const store = natsStoreDir(options.dataDir);
  mkdirSync(store, { recursive: true });
  const pidFile = join(store, "nats-server.pid");
  const earlier = readPidFile(pidFile);
  if (earlier !== null && processAlive(earlier) && isProcessOf(earlier, "nats-server", store)) {
    await stopProcess(earlier, "SIGTERM", 10_000);
  }
  const host = "127.0.0.1";
  const child: ChildProcess = spawn(
    bin,
    [
      ...(options.configFile ? ["-c", options.configFile] : []),
      ...["-a", host, "-p", String(options.port), "-js", "-sd", store, "-P", pidFile, "-l", options.logFile],
      ...(options.cluster
        ? [
            ...["-n", options.cluster.serverName, "--cluster_name", options.cluster.name],
            ...["--cluster", `nats://${host}:${options.cluster.port}`, "--routes", options.cluster.routes.join(",")],
          ]
        : []),
    ],
    { stdio: "ignore", ...(options.env ? { env: { PATH: process.env.PATH ?? "", ...options.env } } : {}) },
  );
  // Stopped with the process that started it, however that one ends, after the apps.
  guardChild(child, { marker: store, signal: "SIGTERM", graceMs: 10_000, stage: 1 });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("error", () => {});
  const deadline = Date.now() + 15_000;
  while (!(await tcpAnswers(host, options.port))) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`nats-server exited with code ${child.exitCode}; see ${options.logFile}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`nats-server did not start within 15 s; see ${options.logFile}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `nats://${host}:${options.port}`,
    port: options.port,
    pid: child.pid as number,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export interface NatsCluster {
  /** Every node's client URL, comma-separated: what NATS_URL is given. */
  url: string;
  nodes: Array<{
    name: string;
    url: string;
    running(): boolean;
    stop(): Promise<void>;
    /** SIGKILL, as a crash: the node's store is left as it was. */
    kill(): Promise<void>;
    start(): Promise<void>;
  }>;
  stop(): Promise<void>;
}

/**
 * A JetStream cluster of `size` nats-server processes on loopback, each with its store under
 * `<dataDir>/<node>`, routed to each other; a node stopped can be started again on its store.
 */
export async function startNatsCluster(options: {
  dataDir: string;
  size?: number;
  ports: { client: number; route: number }[];
  binary?: string;
}): Promise<NatsCluster> {
  const size = options.size ?? 3;
  const routes = options.ports.slice(0, size).map((p) => `nats://127.0.0.1:${p.route}`);
  const nodes = await Promise.all(
    Array.from({ length: size }, async (_, i) => {
      const name = `n${i + 1}`;
      const dataDir = join(options.dataDir, name);
      const ports = options.ports[i] as { client: number; route: number };
      let server: LocalNats | undefined;
      const start = async () => {
        server = await startLocalNats({
          dataDir,
          port: ports.client,
          logFile: join(dataDir, "nats-server.log"),
          ...(options.binary ? { binary: options.binary } : {}),
          cluster: {
            name: "notify",
            serverName: name,
            port: ports.route,
            routes: routes.filter((_, j) => j !== i),
          },
        });
      };
      mkdirSync(dataDir, { recursive: true });
      await start();
      return {
        name,
        url: `nats://127.0.0.1:${ports.client}`,
        running: () => server !== undefined,
        async stop() {
          await server?.stop();
          server = undefined;
        },
        async kill() {
          if (server) process.kill(server.pid, "SIGKILL");
          await server?.stop();
          server = undefined;
        },
        start,
      };
    }),
  );
  return {
    url: nodes.map((n) => n.url).join(","),
    nodes,
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
