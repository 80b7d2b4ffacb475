import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { type AppName, appEntry, ROOT } from "./paths.js";

export interface AppProcess {
  name: AppName;
  child: ChildProcess;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after the grace period. */
  stop(graceMs?: number): Promise<number | null>;
}

/** Spawns a built app (apps/<name>/dist/main.js) with the given environment. */
export function spawnApp(
  name: AppName,
  env: Record<string, string>,
  onLine: (source: string, line: string) => void = () => {},
): AppProcess {
  const child = spawn(process.execPath, [appEntry(name)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => onLine(name, line));
  }
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    name,
    child,
    exited,
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Polls an HTTP readiness endpoint until it answers 200, or throws after the timeout. */
export async function waitReady(url: string, timeoutMs = 30_000, isAlive: () => boolean = () => true): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (!isAlive()) throw new Error(`${url}: the process exited before it was ready`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (response.ok) return;
      last = `HTTP ${response.status}: ${await response.text()}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms (${last})`);
}
