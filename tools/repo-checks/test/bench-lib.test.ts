import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { eventually, TEST_NATS_URL, TEST_PG_URL } from "@notify/testing";
import fc from "fast-check";
import postgres from "postgres";
import t from "tap";

// bench/lib.mjs's children and CPU readings: every process a bench starts is gone once the bench
// ends, however it ends, and the CPU a bench reads is that of the processes it means, or the
// bench is told it cannot be trusted.
const root = join(import.meta.dirname, "..", "..", "..");
const libUrl = pathToFileURL(join(root, "bench", "lib.mjs")).href;
const lib = await import(libUrl);
// The registry bench/lib.mjs exports, loaded alone: a miniature bench starts quickly.
const childrenUrl = pathToFileURL(join(root, "bench", "children.mjs")).href;

/** A process's start time (its stat's 22nd field), or null once it has ended (a zombie has). */
function started(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" || fields[0] === "X" ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

/** The first line a process writes that parses as JSON. */
const firstJson = (child: ChildProcess) =>
  new Promise<Record<string, number>>((resolve, reject) => {
    let text = "";
    child.stdout?.on("data", (chunk) => {
      text += chunk;
      const line = text.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve(JSON.parse(line));
    });
    child.once("exit", (code) => reject(new Error(`exited (${code}) before it wrote its pids: ${text}`)));
  });

const dir = mkdtempSync(join(tmpdir(), "notify-bench-lib-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// A bench in miniature: it starts a child through the registry that starts a grandchild of its
// own (in the child's process group), and forks another; writes their pids; then ends as told.
const idle = join(dir, "idle.mjs");
writeFileSync(idle, "setInterval(() => {}, 1000);\n");
const bench = join(dir, "bench.mjs");
writeFileSync(
  bench,
  `const lib = await import(${JSON.stringify(childrenUrl)});
const mode = process.argv[2];
const child = lib.spawnChild(process.execPath, ["-e", \`
  const { spawn } = require("node:child_process");
  const grandchild = spawn(process.execPath, [${JSON.stringify(idle)}], { stdio: "ignore" });
  console.log(JSON.stringify({ child: process.pid, grandchild: grandchild.pid }));
  setInterval(() => {}, 1000);
\`], { stdio: ["ignore", "pipe", "inherit"] });
const pids = JSON.parse(await new Promise((resolve) => child.stdout.once("data", resolve)));
const forked = lib.forkChild(${JSON.stringify(idle)}, [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
lib.onAbort(async () => console.log("cleaned up"));
console.log(JSON.stringify({ ...pids, forked: forked.pid }));
// Until the test has seen them all running.
await new Promise((resolve) => process.stdin.once("data", resolve));
if (mode === "throw") throw new Error("the bench fails");
if (mode === "reject") void Promise.reject(new Error("a rejection nobody handles"));
if (mode === "timer") setTimeout(() => { throw new Error("thrown in a callback"); }, 10);
if (mode === "exit") process.exit(3);
setInterval(() => {}, 1000);
`,
);

for (const [mode, expected, cleansUp] of [
  ["throw", { code: 1 }, true],
  ["reject", { code: 1 }, true],
  ["timer", { code: 1 }, true],
  ["exit", { code: 3 }, false],
  ["SIGTERM", { code: 143 }, true],
  ["SIGINT", { code: 130 }, true],
  // Nothing in the bench runs: devstack's guardian stops its children's groups.
  ["SIGKILL", { signal: "SIGKILL" }, false],
] as const) {
  t.test(`a bench that ends by ${mode} leaves none of its children running`, async (t) => {
    const child = spawn(process.execPath, [bench, mode], { cwd: root, stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    const pids = await firstJson(child);
    const starts = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, started(pid)]));
    t.equal(Object.keys(pids).length, 3, "a child, its grandchild and a forked child");
    for (const [name, start] of Object.entries(starts)) t.ok(start, `the ${name} runs`);
    if (mode.startsWith("SIG")) child.kill(mode as NodeJS.Signals);
    else child.stdin.write("end\n");
    const end = await exited;
    t.match(end, expected, `the bench ends with ${JSON.stringify(expected)}`);
    if (cleansUp) t.match(output, /cleaned up/, "its clean-ups ran");
    await eventually(
      async () => (Object.entries(pids).every(([name, pid]) => started(pid) !== starts[name]) ? true : undefined),
      // The guardian's grace period (5 s) before its SIGKILL, and room for a loaded machine.
      20_000,
      "the children to be gone",
    );
    t.pass("the child, the grandchild and the forked child are gone");
  });
}

/** A node process that burns `ms` of CPU when told (a line on its stdin), then writes how much it burned. */
function burner() {
  const child = spawn(
    process.execPath,
    [
      "-e",
      `process.stdin.on("data", (d) => {
        const start = process.cpuUsage();
        const ms = Number(String(d));
        for (;;) { const u = process.cpuUsage(start); if (u.user + u.system >= ms * 1000) break; }
        const u = process.cpuUsage(start);
        console.log(JSON.stringify({ burned: (u.user + u.system) / 1000 }));
      });
      console.log(JSON.stringify({ ready: true }));`,
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines: Record<string, number>[] = [];
  let text = "";
  child.stdout.on("data", (chunk) => {
    text += chunk;
    const parts = text.split("\n");
    text = parts.pop() ?? "";
    for (const part of parts) lines.push(JSON.parse(part));
  });
  const next = () => eventually(async () => lines.shift(), 10_000, "the burner to answer");
  return {
    child,
    ready: next(),
    async burn(ms: number) {
      child.stdin.write(`${ms}\n`);
      return (await next()).burned as number;
    },
  };
}

t.test("the CPU read for a process is what it spent, and it is known as the bench's own", async (t) => {
  const busy = burner();
  t.teardown(() => void busy.child.kill("SIGKILL"));
  await busy.ready;
  const ours = new Map<number, boolean>();
  const groupOf = ({ pid, ours: mine }: { pid: number; ours: boolean }) => {
    ours.set(pid, mine);
    return pid === busy.child.pid ? "busy" : null;
  };
  const before = lib.cpuTicks(groupOf);
  const burned = await busy.burn(300);
  const spent = lib.cpuSpent(before, lib.cpuTicks(groupOf));
  t.ok(burned >= 300, `it burned ${burned.toFixed(0)} ms`);
  // A tick is 10 ms: a reading at each end, and what the process did around its loop.
  t.ok(Math.abs(spent.cpu.busy / 1000 - burned) <= 40, `read ${(spent.cpu.busy / 1000).toFixed(0)} ms`);
  t.same(spent.seen, { busy: 1 }, "its one process was in both readings");
  t.same(spent.ended, []);
  t.equal(ours.get(busy.child.pid as number), true, "a child of this process is its own");
  t.equal(ours.get(1), false, "init is not");
  t.same(lib.cpuProblems({ spent, delivered: 1000, groups: ["busy"], leastUs: 100 }), [], "nothing wrong with it");
  // A copy with the figures by group alone (as a bench spreads a reading) still reads by process.
  const copied = lib.cpuBetween({ idle: 0, ...before }, lib.cpuTicks(groupOf));
  t.ok(Math.abs(copied.busy - spent.cpu.busy) <= 20_000, "the same figure");
  t.equal(copied.idle, 0);
});

t.test("a process that ends between two readings is reported, and takes nothing off its group", async (t) => {
  const ending = burner();
  const staying = burner();
  t.teardown(() => {
    ending.child.kill("SIGKILL");
    staying.child.kill("SIGKILL");
  });
  await Promise.all([ending.ready, staying.ready]);
  // Its time before the first reading is its group's past: it must not come off the window.
  await ending.burn(300);
  const group = ({ pid }: { pid: number }) => (pid === ending.child.pid || pid === staying.child.pid ? "g" : null);
  const before = lib.cpuTicks(group);
  ending.child.kill("SIGKILL");
  await new Promise((resolve) => ending.child.once("exit", resolve));
  const spent = lib.cpuSpent(before, lib.cpuTicks(group));
  t.ok(
    spent.cpu.g >= 0 && spent.cpu.g < 50_000,
    `the group read ${(spent.cpu.g / 1000).toFixed(0)} ms, not minus its past`,
  );
  t.same(
    spent.ended.map((p: { pid: number; group: string }) => [p.pid, p.group]),
    [[ending.child.pid, "g"]],
  );
  t.same(spent.seen, { g: 1 }, "the other was in both readings");
  t.match(
    lib.cpuProblems({ spent, cpu: { g: 500_000 }, delivered: 1000, groups: ["g"], leastUs: 100 }),
    [/g process \d+ .* ended during the run/],
    "a figure of its group cannot be trusted",
  );
});

t.test("cpuProblems refuses what cannot be right, and only that", async (t) => {
  const spentOf = (cpu: Record<string, number>, extra: object = {}) => ({
    cpu,
    seen: Object.fromEntries(Object.keys(cpu).map((g) => [g, 1])),
    ended: [],
    ...extra,
  });
  const groups = ["floor", "nats-server", "postgres"];
  const fine = { floor: 700_000, "nats-server": 200_000, postgres: 500_000 };
  t.same(lib.cpuProblems({ spent: spentOf(fine), delivered: 1000, groups, leastUs: 100 }), []);
  t.same(lib.cpuProblems({ spent: null, delivered: 1000, groups, leastUs: 100 }), [], "not measured (no /proc)");
  // The run that read 2-3 µs an email for the one-process floor.
  t.match(
    lib.cpuProblems({
      spent: spentOf({ floor: 1000, "nats-server": 1000, postgres: 500 }),
      delivered: 1000,
      groups,
      leastUs: 100,
    }),
    [/spent 2\.5 µs per delivery together .* under the least believable 100 µs/],
  );
  t.match(
    lib.cpuProblems({
      spent: spentOf(fine),
      cpu: { ...fine, postgres: 0 },
      delivered: 1000,
      groups,
      leastUs: 100,
    }),
    [/postgres spent 0\.0 ms \(500\.0 ms as read/],
    "the idle taken off swallowed a process",
  );
  t.match(
    lib.cpuProblems({
      spent: spentOf(fine, { seen: { floor: 1, postgres: 1 } }),
      delivered: 1000,
      groups,
      leastUs: 100,
    }),
    [/no nats-server process ran throughout/],
  );
  fc.assert(
    fc.property(
      fc.dictionary(fc.constantFrom("a", "b", "c"), fc.double({ min: -1e7, max: 1e7, noNaN: true }), { minKeys: 1 }),
      fc.integer({ min: 1, max: 100_000 }),
      (cpu, delivered) => {
        const names = Object.keys(cpu);
        const problems = lib.cpuProblems({ spent: spentOf(cpu), delivered, groups: names, leastUs: 100 });
        const believable =
          names.every((g) => (cpu[g] as number) > 0) &&
          names.reduce((n, g) => n + (cpu[g] as number), 0) / delivered >= 100;
        return believable ? problems.length === 0 : problems.length > 0;
      },
    ),
  );
});

t.test("the servers a bench uses are found among this machine's processes", async (t) => {
  const sql = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  t.teardown(() => sql.end());
  const servers = await lib.serverProcesses(sql, TEST_NATS_URL);
  t.ok(servers.postmaster, `PostgreSQL's postmaster: ${servers.postmaster}`);
  t.match(readFileSync(`/proc/${servers.postmaster}/stat`, "utf8"), /\(postgres\)/);
  t.ok(servers.nats, `nats-server: ${servers.nats}`);
  t.equal(servers.groupOf({ pid: servers.postmaster, ppid: 1, comm: "postgres" }), "postgres");
  t.equal(servers.groupOf({ pid: 4_000_001, ppid: servers.postmaster, comm: "postgres" }), "postgres", "a backend");
  t.equal(
    servers.groupOf({ pid: 4_000_002, ppid: 4_000_003, comm: "postgres" }),
    null,
    "another PostgreSQL server's process (a test's embedded one) is not counted",
  );
  t.equal(servers.groupOf({ pid: servers.nats, ppid: 1, comm: "nats-server" }), "nats-server");
  t.equal(servers.groupOf({ pid: 4_000_004, ppid: 1, comm: "nats-server" }), null, "another nats-server");
});

t.test("the process listening on a port is found", async (t) => {
  const server = spawn(
    process.execPath,
    [
      "-e",
      `const s = require("node:net").createServer().listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: s.address().port })));`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  t.teardown(() => void server.kill("SIGKILL"));
  const { port } = await firstJson(server);
  t.equal(lib.listenerPid(port), server.pid);
  t.equal(lib.listenerPid(port, "nats-server"), null, "not when its name is another");
});
