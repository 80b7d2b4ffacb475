import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, mkdirSync } from "node:fs";
import { connect } from "node:net";
import { delimiter, join } from "node:path";

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

export const NATS_INSTALL_HELP =
  "No nats-server was found and none answers at NATS_URL. Install one (Debian/Ubuntu: `sudo apt-get install nats-server`; " +
  "macOS: `brew install nats-server`; or `go install github.com/nats-io/nats-server/v2@latest`), " +
  "or point NATS_URL at a running server with JetStream enabled (`nats-server -js`), or set NATS_SERVER_BIN to the binary.";

export interface LocalNats {
  url: string;
  started: boolean;
  stop(): Promise<void>;
}

/**
 * Uses the NATS server at `url` when one answers; otherwise starts a local nats-server with
 * JetStream, its store under `dataDir`, on the same host and port.
 */
export async function ensureNats(url: string, dataDir: string, binary?: string): Promise<LocalNats> {
  const parsed = new URL(url.split(",")[0] as string);
  const host = parsed.hostname || "127.0.0.1";
  const port = Number(parsed.port || 4222);
  if (await tcpAnswers(host, port)) return { url, started: false, stop: async () => {} };
  const bin = findNatsServer(binary);
  if (!bin) throw new Error(NATS_INSTALL_HELP);
  mkdirSync(dataDir, { recursive: true });
  const child: ChildProcess = spawn(bin, ["-a", host, "-p", String(port), "-js", "-sd", dataDir], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + 10_000;
  while (!(await tcpAnswers(host, port))) {
    if (child.exitCode !== null)
      throw new Error(`nats-server exited with code ${child.exitCode}; is port ${port} free?`);
    if (Date.now() > deadline) throw new Error("nats-server did not start within 10 s");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url: `nats://${host}:${port}`,
    started: true,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await exited;
    },
  };
}
