import { spawn } from "node:child_process";
import t from "tap";

// An app's logger writes to stdout in batches: info lines wait a little and go out together, a
// warning goes out at once with everything before it, and nothing is lost on exit. Each case runs
// a child process that logs through createLogger and counts its writes to stdout (fs.write and
// fs.writeSync on fd 1, the calls pino's destination makes).

interface Child {
  /** stdout's messages so far. */
  lines(): string[];
  /** Resolves once `text` has appeared on stderr or stdout, or the child has exited. */
  seen(text: string): Promise<void>;
  stderr(): string;
  kill(): void;
  exited: Promise<number | null>;
}

function child(t: { teardown(fn: () => unknown): void }, body: string): Child {
  const proc = spawn(
    process.execPath,
    [
      "--conditions=@notify/source",
      "--import=tsx",
      "--input-type=module",
      "-e",
      `import fs from "node:fs";
       let writes = 0;
       for (const name of ["write", "writeSync"]) {
         const original = fs[name];
         fs[name] = function (fd, ...rest) {
           if (fd === 1) writes++;
           return original.call(this, fd, ...rest);
         };
       }
       process.on("exit", () => process.stderr.write("writes " + writes + "\\n"));
       const { createLogger } = await import("@notify/log");
       const log = createLogger({ name: "probe", level: "info" });
       const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
       ${body}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  proc.stdout.on("data", (d) => {
    out += d;
    wake();
  });
  proc.stderr.on("data", (d) => {
    err += d;
    wake();
  });
  const exited = new Promise<number | null>((resolve) => proc.on("close", (code) => resolve(code)));
  void exited.then(wake);
  let done = false;
  void exited.then(() => {
    done = true;
  });
  t.teardown(() => proc.kill("SIGKILL"));
  return {
    lines: () =>
      out
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l).msg as string),
    seen: (text) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (done || err.includes(text) || out.includes(text)) {
            waiters.delete(check);
            resolve();
          }
        };
        waiters.add(check);
        check();
      }),
    stderr: () => err,
    kill: () => proc.kill("SIGKILL"),
    exited,
  };
}

const writesOf = (stderr: string) => Number(/writes (\d+)/.exec(stderr)?.[1] ?? Number.NaN);

t.test("info lines logged one per tick over time go out in a few writes, all of them, in order", async (t) => {
  const proc = child(t, `for (let i = 0; i < 200; i++) { log.info("line " + i); await sleep(1); }`);
  await proc.exited;
  t.same(
    proc.lines(),
    Array.from({ length: 200 }, (_, i) => `line ${i}`),
  );
  const writes = writesOf(proc.stderr());
  // 200 lines of about 100 bytes over at least 200 ms: a batch per 4 KiB or per 100 ms.
  t.ok(writes <= 20, `${writes} writes for 200 lines`);
});

t.test("an info line alone is written within the flush interval, with nothing else to push it", async (t) => {
  const proc = child(t, `log.info("alone"); setInterval(() => {}, 1000);`);
  // The child never exits by itself: its line must arrive while it runs.
  await proc.seen("alone");
  t.same(proc.lines(), ["alone"]);
  proc.kill();
});

t.test("a warning is written at once with the lines before it: a process killed after it loses none", async (t) => {
  const proc = child(
    t,
    `log.info("one"); log.info("two"); log.warn("trouble");
     process.stderr.write("logged\\n");
     for (;;) {}`,
  );
  await proc.seen("logged");
  proc.kill();
  await proc.exited;
  t.same(proc.lines(), ["one", "two", "trouble"]);
});

t.test("lines still queued when the process exits are written", async (t) => {
  const proc = child(t, `log.info("before exit"); log.info("last"); process.exit(0);`);
  t.equal(await proc.exited, 0);
  t.same(proc.lines(), ["before exit", "last"]);
});
