import { existsSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user (the postgres server, for one).
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Whether `pid` runs `program` with `marker` somewhere on its command line (Linux /proc): the
 * check that a pid from a pid file is still the process that wrote it, not a reuse of the number.
 * Elsewhere (no /proc) a live pid is taken at its word.
 */
export function isProcessOf(pid: number, program: string, marker: string): boolean {
  const file = `/proc/${pid}/cmdline`;
  if (!existsSync("/proc/self/cmdline")) return processAlive(pid);
  try {
    const args = readFileSync(file, "utf8").split("\0");
    return args.some((arg) => arg.endsWith(program)) && args.some((arg) => arg.includes(marker));
  } catch {
    return false;
  }
}

/** Sends `signal`, waits for the process to go, and kills it after the grace period. */
export async function stopProcess(pid: number, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (processAlive(pid)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
      await sleep(100);
      return;
    }
    await sleep(50);
  }
}

/** The pid in a pid file, or null when there is none or it holds no number. */
export function readPidFile(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, "utf8").trim().split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Whether the process that started `pid` still runs (Linux /proc): an orphan is handed to init
 * (or a subreaper), so its parent is pid 1 or not the process it was. Elsewhere: assumed alive.
 */
export function parentAlive(pid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const ppid = Number(/PPid:\s+(\d+)/.exec(status)?.[1] ?? 0);
    if (ppid <= 1) return false;
    const parent = readFileSync(`/proc/${ppid}/cmdline`, "utf8");
    return parent.includes("libs/devstack/");
  } catch {
    return !existsSync("/proc/self/status");
  }
}
