import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./paths.js";

/**
 * A process that must not outlive the one that started it: an app, a sandbox, a nats-server, an
 * embedded PostgreSQL. Its pid, or the pid file it writes (read only when it is time to stop it:
 * PostgreSQL writes its own once it runs).
 */
export interface Guard {
  pid?: number;
  pidFile?: string;
  /** Text its command line holds: checked before it is signalled, so a reused pid is left alone. */
  marker: string;
  /** It leads a process group of its own (spawned detached): the signals go to the whole group. */
  group?: boolean;
  /** How it is asked to stop; SIGKILL follows `graceMs` later. */
  signal: NodeJS.Signals;
  graceMs: number;
  /** Lower stages stop first: the apps (0) before the servers they use (1). */
  stage: number;
}

/** A guard as the watcher knows it. */
export interface GuardEntry extends Guard {
  id: number;
}

/** What the watcher is sent: a process to stop when its parent ends, or one that ended first. */
export type GuardMessage = { add: GuardEntry } | { remove: number };

const WATCHER_ENTRY = join(ROOT, "libs", "devstack", "dist", "guardian-cli.js");
const guarded = new Map<number, GuardEntry>();
let watcher: ChildProcess | undefined;
let nextId = 1;

function send(message: GuardMessage): void {
  watcher?.send(message, () => {});
}

/**
 * Has `target` stopped once this process ends, however it ends: it returns, throws, is signalled
 * (tap times a test file out with SIGALRM, then SIGKILL) or is SIGKILLed. No handler in this
 * process can do that for a SIGKILL, so a watcher process does (guardian-cli): one per process,
 * started with the first guard, in a process group of its own (a signal to this process's group
 * does not reach it) and with an IPC channel to this process that closes when this process
 * ends, for any reason. The watcher then stops every process still guarded. Answers the release:
 * the process was stopped, or ended, by other means.
 */
export function guard(target: Guard): () => void {
  const entry: GuardEntry = { ...target, id: nextId++ };
  guarded.set(entry.id, entry);
  if (watcher?.connected) send({ add: entry });
  else {
    if (!existsSync(WATCHER_ENTRY)) throw new Error(`${WATCHER_ENTRY} is missing: build the repository (npx tsc -b)`);
    // The channel and the process are unreferenced: the watcher never keeps this process running.
    watcher = spawn(process.execPath, [WATCHER_ENTRY], {
      cwd: ROOT,
      detached: true,
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "ignore", "ignore", "ipc"],
    });
    watcher.on("error", () => {});
    watcher.unref();
    watcher.channel?.unref();
    // The first watcher, or one after an earlier one went away: told of everything still guarded.
    for (const known of guarded.values()) send({ add: known });
  }
  return () => {
    if (guarded.delete(entry.id) && watcher?.connected) send({ remove: entry.id });
  };
}

/** Guards a child just spawned, until it exits. */
export function guardChild(child: ChildProcess, how: Omit<Guard, "pid" | "pidFile">): void {
  if (child.pid === undefined) return;
  const release = guard({ ...how, pid: child.pid });
  child.once("exit", release);
}
