import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { ConsoleOptions, PublicApi } from "@notify/console";
import { mountConsole } from "@notify/console";
import { createAdminApp, listen } from "@notify/http";
import { captureLogger, eventually, freePort, TEST_NATS_URL } from "@notify/testing";
import type { Test } from "tap";

const root = fileURLToPath(new URL("../../../..", import.meta.url));

/**
 * Ingest as its own process, from source, on `on`'s database and NATS namespace, with `settings`
 * over the defaults; answers its public and operator URLs and its log lines as they come.
 * Stopped on teardown.
 */
export async function startIngest(
  t: Pick<Test, "teardown">,
  on: { databaseUrl: string; namespace: string; partitions?: number },
  settings: Record<string, string> = {},
) {
  const port = await freePort();
  const adminPort = await freePort();
  const lines: string[] = [];
  const child: ChildProcess = spawn(
    process.execPath,
    ["--conditions=@notify/source", "--import=tsx", "apps/ingest/src/main.ts"],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        DATABASE_URL: on.databaseUrl,
        NATS_URL: TEST_NATS_URL,
        NATS_NAMESPACE: on.namespace,
        LANE_PARTITIONS: String(on.partitions ?? 2),
        CURSOR_SECRET: "x".repeat(32),
        PORT: String(port),
        HOST: "127.0.0.1",
        ADMIN_PORT: String(adminPort),
        LOG_LEVEL: "info",
        ...settings,
      },
    },
  );
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => lines.push(line));
  }
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await once(child, "exit");
  });
  const admin = `http://127.0.0.1:${adminPort}`;
  // Ready, or gone: a process that exited fails at once, with what it printed.
  const ready = await eventually(
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) return false;
      return (await fetch(`${admin}/readyz`).catch(() => null))?.ok ? true : undefined;
    },
    60_000,
    "ingest ready",
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${lines.slice(-20).join("\n")}`);
  });
  if (!ready) throw new Error(`ingest exited before it was ready:\n${lines.slice(-20).join("\n")}`);
  return { url: `http://127.0.0.1:${port}`, admin, lines };
}

/** The public API at `url`, over HTTP: what ingest hands the console in-process, here across a socket. */
export const apiAt = (url: string): PublicApi => ({
  request: (path, init) => fetch(`${url}${path}`, init),
});

/**
 * The console mounted as ingest mounts it (on @notify/http's operator app), listening on a free
 * loopback port: over real sockets, so the pre-auth throttle sees the caller's address as in
 * production. Answers its URL and its log lines.
 */
export async function consoleApp(t: Pick<Test, "teardown">, options: ConsoleOptions) {
  const { log, lines } = captureLogger("console");
  const admin = createAdminApp(log, {}, () => false);
  mountConsole(admin, options);
  const server = await listen(admin, 0, "127.0.0.1");
  t.teardown(() => server.close());
  return { admin, url: `http://127.0.0.1:${server.port}`, lines };
}
