// The registry of the processes a bench starts, which bench/lib.mjs exports. It loads nothing
// but Node.js's modules and devstack's guardian: it is quick to load wherever it is needed.
import { fork, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { guardChild } from "@notify/devstack/local";

/**
 * The processes a bench started itself (floors, servers, sandboxes, load generators), each the
 * leader of a process group of its own (spawned detached), from its start until it exits. A
 * bench stops them on every way it can end: it returns (`stopChildren`), it throws or leaves a
 * rejection unhandled, or it is sent SIGINT, SIGTERM or SIGHUP (the `onAbort` clean-ups run, then
 * every group is stopped, SIGKILL after a grace period), and whatever is still running when the
 * process exits is SIGKILLed from process.on("exit"). Signals go to the whole group, so what a
 * child started itself goes too. If the bench is SIGKILLed, devstack's guardian (which also
 * stops the apps startStack spawned) stops them, and a forked floor stops once its IPC channel
 * closes.
 */
const children = new Set();
const abortHooks = [];

/** Sends `signal` to the process group `pid` leads; false once no process of it is left. */
function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

function register(child, marker) {
  if (child.pid === undefined) return child; // it did not start: its "error" event says why
  handleEnds();
  children.add(child);
  guardChild(child, { marker, group: true, signal: "SIGTERM", graceMs: 5000, stage: 0 });
  child.once("exit", () => {
    children.delete(child);
    // A process the child started and left behind leaves with it.
    signalGroup(child.pid, "SIGKILL");
  });
  return child;
}

/** node:child_process's spawn, as a registered child leading its own process group. */
export function spawnChild(command, args = [], options = {}) {
  const { marker = args[0] ?? command, ...spawnOptions } = options;
  return register(spawn(command, args, { ...spawnOptions, detached: true }), marker);
}

/** node:child_process's fork of `module` (a path or file URL), as a registered child leading its own process group. */
export function forkChild(module, args = [], options = {}) {
  const path = module instanceof URL ? fileURLToPath(module) : module;
  return register(fork(path, args, { ...options, detached: true }), path);
}

/**
 * Stops a registered child and its process group: `signal` to the group, SIGKILL `graceMs`
 * later; resolves once the child has exited.
 */
export async function stopChild(child, { signal = "SIGTERM", graceMs = 5000 } = {}) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  signalGroup(child.pid, signal);
  const timer = setTimeout(() => signalGroup(child.pid, "SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Stops every registered child still running (stopChild's way). */
export const stopChildren = () => Promise.all([...children].map((child) => stopChild(child)));

/** The registered children still running. */
export const runningChildren = () => [...children];

/** SIGKILLs every registered child's process group still running, at once: what an "exit" handler can do. */
function killChildren() {
  for (const child of children) signalGroup(child.pid, "SIGKILL");
}

/**
 * Runs `fn` (async) when the bench fails or is interrupted, before its children are stopped:
 * dropping its databases and namespaces, stopping what startStack started. The clean-ups run
 * last registered first, 30 s at most in all.
 */
export function onAbort(fn) {
  handleEnds();
  abortHooks.push(fn);
}

let handling = false;
let aborting = false;
function handleEnds() {
  if (handling) return;
  handling = true;
  process.on("exit", killChildren);
  // An unhandled rejection (a failed top-level await included) lands here too: Node.js raises
  // it as an uncaught exception.
  process.on("uncaughtException", (error) => void abort(1, error));
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ]) {
    process.on(signal, () => void abort(code, new Error(`${signal}: stopping`)));
  }
}

async function abort(code, error) {
  console.error(error);
  // A second signal, or a failure while cleaning up: the children go at once.
  if (aborting) process.exit(code);
  aborting = true;
  setTimeout(() => process.exit(code), 30_000);
  for (const hook of abortHooks.splice(0).reverse()) {
    try {
      await hook();
    } catch (failure) {
      console.error(failure);
    }
  }
  await stopChildren();
  process.exit(code);
}
