import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { guardChild } from "./guardian.js";
import { appEntry, type ProcessName, ROOT } from "./paths.js";

export interface AppProcess {
  name: ProcessName;
  child: ChildProcess;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after the grace period. */
  stop(graceMs?: number): Promise<number | null>;
  /**
   * Resolves once `url` answers 200; throws when the process exits first (with its exit code or
   * signal and its last lines of output, whatever `onLine` does with them) or after the timeout.
   */
  ready(url: string, timeoutMs?: number): Promise<void>;
}

/** Lines of an app's output kept for the error of a start that fails. */
const KEPT_LINES = 40;

/**
 * Node.js options of every app process. Nearly all that the apps allocate for a message is
 * garbage once it is handled (parsed messages, the HTTP clients' objects, statements), and V8
 * collects its young generation each time a semi-space (16 MB by default) fills, several times a
 * second in each app under load. Larger semi-spaces mean fewer collections and less time in them,
 * for up to 32 MB more memory per process under load. The image sets the same in NODE_OPTIONS.
 */
export const APP_NODE_OPTIONS: readonly string[] = ["--max-semi-space-size=32"];

/**
 * Spawns a built app (apps/<name>/dist/main.js) with the given environment; `nodeOptions` go after
 * APP_NODE_OPTIONS (a profiler's, for a bench).
 */
export function spawnApp(
  name: ProcessName,
  env: Record<string, string>,
  onLine: (source: string, line: string) => void = () => {},
  nodeOptions: readonly string[] = [],
): AppProcess {
  const child = spawn(process.execPath, [...APP_NODE_OPTIONS, ...nodeOptions, appEntry(name)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Stopped with the process that started it, however that one ends: the apps first, a few
  // seconds to drain while the servers they use are still up.
  guardChild(child, { marker: appEntry(name), signal: "SIGTERM", graceMs: 5000, stage: 0 });
  const recent: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      recent.push(line);
      if (recent.length > KEPT_LINES) recent.shift();
      onLine(name, line);
    });
  }
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    name,
    child,
    exited,
    async stop(graceMs = 15_000) {
      await stopChild(child, exited, () => child.kill("SIGTERM"), graceMs);
      return child.exitCode;
    },
    async ready(url, timeoutMs = 30_000) {
      try {
        await waitReady(url, timeoutMs, () => child.exitCode === null && child.signalCode === null);
      } catch (error) {
        // The output of an exit is read after the exit event: give it a moment to arrive.
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2000))]);
        await new Promise((resolve) => setTimeout(resolve, 100));
        const how = child.signalCode ?? (child.exitCode === null ? "still running" : `exit code ${child.exitCode}`);
        throw new Error(
          `${name}: ${(error as Error).message} (${how}); its last output:\n${recent.join("\n") || "(none)"}`,
        );
      }
    },
  };
}

/** Asks a child to stop (`ask`), waits for it to exit, and kills it after the grace period. */
export async function stopChild(
  child: ChildProcess,
  exited: Promise<unknown>,
  ask: () => void,
  graceMs: number,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  ask();
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * A helper process of the stack (a built entry of libs/devstack with an IPC channel): its lines go
 * to `onLine` under `source`; it answers `{ ready }` once up or `{ error }`, and is a child whose
 * exit before that fails the start.
 */
export async function spawnHelper<T>(options: {
  entry: string;
  args?: string[];
  env?: Record<string, string>;
  detached?: boolean;
  /**
   * Once the process that started it has ended, however: how long it has after SIGTERM (it also
   * stops by itself when its IPC channel closes), and its stage (0 with the apps, 1 with the
   * servers).
   */
  orphaned?: { graceMs: number; stage: number };
  source: string;
  onLine: (source: string, line: string) => void;
}): Promise<{ ready: T; child: ChildProcess; exited: Promise<void> }> {
  const child = spawn(process.execPath, [options.entry, ...(options.args ?? [])], {
    cwd: ROOT,
    detached: options.detached ?? false,
    ...(options.env ? { env: options.env } : {}),
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  const orphaned = options.orphaned ?? { graceMs: 5000, stage: 0 };
  guardChild(child, { marker: options.entry, signal: "SIGTERM", ...orphaned });
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => options.onLine(options.source, line));
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const ready = await new Promise<T>((resolve, reject) => {
    child.on("message", (message: { ready?: T; error?: string }) => {
      if (message.ready) resolve(message.ready);
      else if (message.error) reject(new Error(message.error));
    });
    child.once("exit", (code) => reject(new Error(`${options.source} exited during start (code ${code})`)));
  });
  return { ready, child, exited };
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
