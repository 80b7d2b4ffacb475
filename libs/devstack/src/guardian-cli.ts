import { existsSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type { GuardEntry, GuardMessage } from "./guardian.js";

// The watcher of one process's children (guardian.ts): started by that process with an IPC
// channel, in a process group of its own. It is told which processes to stop and which ended on
// their own; when the channel closes (its parent ended, however: it returned, threw, was
// signalled or SIGKILLed), it stops every process still on its list, stage by stage (the apps
// before the servers they use): each its own signal, SIGKILL after its grace period. Then it
// exits. It loads nothing but Node's own modules: it starts fast and stays small.

const guarded = new Map<number, GuardEntry>();
const hasProc = existsSync("/proc/self/stat");

process.on("message", (message: GuardMessage) => {
  if ("add" in message) guarded.set(message.add.id, message.add);
  else guarded.delete(message.remove);
});
// Messages read before the channel closed are emitted first; a moment's wait takes in any
// still on their way.
process.on("disconnect", () => void sleep(50).then(stopAll));
// Its own group: a terminal's signals do not reach it, and its parent's end is its only cue.
process.on("SIGINT", () => {});
process.on("SIGHUP", () => {});

/**
 * Whether `pid` has ended (a zombie has: only its parent has not read its status yet); with
 * `group`, whether no process of its group is left.
 */
function ended(pid: number, group = false): boolean {
  if (hasProc && !group) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      return state === "Z" || state === "X";
    } catch {
      return true;
    }
  }
  try {
    process.kill(group ? -pid : pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "EPERM";
  }
}

/** Whether `pid` is still the process guarded, not a reuse of its number (Linux; elsewhere assumed). */
function isGuarded(pid: number, marker: string): boolean {
  if (!hasProc) return true;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker);
  } catch {
    return false;
  }
}

function pidOf(entry: GuardEntry): number | null {
  if (entry.pid !== undefined) return entry.pid;
  if (entry.pidFile === undefined) return null;
  try {
    const pid = Number(readFileSync(entry.pidFile, "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function signal(pid: number, name: NodeJS.Signals): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    return false;
  }
}

async function stopAll(): Promise<void> {
  const stages = [...new Set([...guarded.values()].map((entry) => entry.stage))].sort((a, b) => a - b);
  for (const stage of stages) {
    const stopping: Array<{ target: number; group: boolean; killAt: number; killed: boolean }> = [];
    for (const entry of guarded.values()) {
      if (entry.stage !== stage) continue;
      const pid = pidOf(entry);
      const group = entry.group === true;
      if (pid === null || ended(pid, group) || (!ended(pid) && !isGuarded(pid, entry.marker))) continue;
      if (signal(group ? -pid : pid, entry.signal)) {
        stopping.push({ target: pid, group, killAt: Date.now() + entry.graceMs, killed: false });
      }
    }
    // Until each has ended, or briefly after its SIGKILL (one stuck in the kernel is not waited for).
    const giveUpAt = Math.max(0, ...stopping.map((s) => s.killAt)) + 2000;
    while (stopping.some((s) => !ended(s.target, s.group)) && Date.now() < giveUpAt) {
      for (const s of stopping) {
        if (s.killed || Date.now() < s.killAt || ended(s.target, s.group)) continue;
        signal(s.group ? -s.target : s.target, "SIGKILL");
        s.killed = true;
      }
      await sleep(50);
    }
  }
  process.exit(0);
}
