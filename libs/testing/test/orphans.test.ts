import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import t from "tap";

// A test process that ends before its harness stops the stack (tap times the file out: an IPC
// message, SIGALRM half a second later, SIGKILL half a second after that; or it is killed, or it
// throws) leaves no process of that stack running: each one is watched for its parent's end.
// The harness here is a chaos run's (embedded PostgreSQL, nats-server, the provider sandboxes,
// the four apps), in a child process ended once its stack is up.

const CHILD = fileURLToPath(new URL("./fixtures/chaos-child.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** Every process below `root` (Linux /proc), by pid. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = parentOf(Number(entry));
    if (ppid !== null) children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift() as number) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** The fields of /proc/<pid>/stat after the command name: state, ppid, ... (null: no such process). */
function stat(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}
const parentOf = (pid: number) => {
  const fields = stat(pid);
  return fields ? Number(fields[1]) : null;
};
/** Running, or sleeping: a zombie has ended, only its parent has not read its exit yet. */
const alive = (pid: number) => {
  const state = stat(pid)?.[0];
  return state !== undefined && state !== "Z" && state !== "X";
};
const commandOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim().slice(0, 160);
  } catch {
    return "?";
  }
};

for (const signal of ["SIGTERM", "SIGKILL"] as const) {
  t.test(
    `a chaos run's process ended by ${signal} leaves none of its stack's processes running`,
    { skip: !existsSync("/proc/self/stat") && "reads the process tree from /proc" },
    async (t) => {
      const dataDir = mkdtempSync(join(tmpdir(), "notify-orphans-"));
      const child = spawn(process.execPath, ["--conditions=@notify/source", "--import=tsx", CHILD, dataDir], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const output: string[] = [];
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      let stack: number[] = [];
      // Whatever the outcome, nothing of the stack stays behind this test either.
      t.teardown(async () => {
        child.kill("SIGKILL");
        await exited;
        for (const pid of stack.filter(alive)) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {}
        }
        rmSync(dataDir, { recursive: true, force: true });
      });
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: child.stdout }).on("line", (line) => {
          output.push(line);
          if (line === "stack up") resolve();
        });
        createInterface({ input: child.stderr }).on("line", (line) => output.push(line));
        void exited.then(() =>
          reject(new Error(`the chaos run exited before its stack was up:\n${output.join("\n")}`)),
        );
      });

      stack = descendants(child.pid as number);
      const commands = stack.map((pid) => `${pid} ${commandOf(pid)}`);
      t.ok(
        commands.some((c) => c.includes("postgres")) &&
          commands.some((c) => c.includes("nats-server")) &&
          commands.some((c) => c.includes("apps/workers/dist/main.js")),
        "the stack runs PostgreSQL, nats-server and the apps below the chaos run's process",
      );

      child.kill(signal);
      await exited;
      const deadline = Date.now() + 15_000;
      while (stack.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      const left = stack.filter(alive).map((pid) => `${pid} ${commandOf(pid)}`);
      t.same(left, [], "within 15 s of its end, no process of the stack is alive");
    },
  );
}
