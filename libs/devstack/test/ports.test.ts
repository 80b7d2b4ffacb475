import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import t from "tap";
import { freePort, portClaimed, portFree, ROOT, rememberedPort, type StackState } from "../src/index.js";
import { choosePorts } from "../src/stack.js";

// The stack picks every port before it listens on any: a port handed out must not be handed out
// again, or two of its servers meet on one (EADDRINUSE at start).

const given = new Set<number>();

t.test("one process never gets the same free port twice, though none is bound yet", async (t) => {
  const ports = [];
  for (let i = 0; i < 500; i++) ports.push(await freePort());
  for (const port of ports) given.add(port);
  t.equal(new Set(ports).size, ports.length, "500 picks, 500 ports");
});

t.test("a port to avoid is never picked; a free one is found if any is left", async (t) => {
  let left = 20_000;
  while (given.has(left) || portClaimed(left) || !(await portFree(left))) left++;
  const avoid = Array.from({ length: 12_000 }, (_, i) => 20_000 + i).filter((p) => p !== left);
  t.equal(await freePort(avoid), left, "the one port not avoided");
});

t.test("processes picking ports at the same time never get the same one", async (t) => {
  // Three processes pick 300 ports each at once, none binding them, and all stay alive until
  // the three are done (a process gone frees its claims): at random over the range, about 22
  // ports would be picked twice.
  const children: ChildProcess[] = [];
  const picks = () =>
    new Promise<number[]>((resolve, reject) => {
      const script = `const { freePort } = await import(${JSON.stringify(join(ROOT, "libs/devstack/dist/index.js"))});
        const ports = []; for (let i = 0; i < 300; i++) ports.push(await freePort());
        process.stdout.write(JSON.stringify(ports) + "\\n"); setInterval(() => {}, 1000);`;
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      children.push(child);
      let out = "";
      child.stdout.on("data", (chunk) => {
        out += chunk;
        if (out.endsWith("\n")) resolve(JSON.parse(out) as number[]);
      });
      child.once("exit", (code) => reject(new Error(`exit ${code}`)));
    });
  t.teardown(() => {
    for (const child of children) child.kill();
  });
  const all = (await Promise.all([picks(), picks(), picks()])).flat();
  t.equal(all.length, 900);
  t.equal(new Set(all).size, all.length, "no port handed to two processes");
});

t.test("a port remembered under two names (or taken by another name) goes to one of them", async (t) => {
  const shared = await freePort();
  const state: StackState = { ports: { processor: shared, plivoSandbox: shared } };
  const processor = await rememberedPort(state, "processor");
  const plivo = await rememberedPort(state, "plivoSandbox");
  t.not(processor, plivo);
  t.equal(new Set(Object.values(state.ports)).size, 2, "the state remembers two ports");
});

t.test("a remembered port that is busy is replaced by a free one", async (t) => {
  const busy = createServer();
  const port = await freePort();
  await new Promise<void>((resolve) => busy.listen(port, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => busy.close(() => resolve())));
  const state: StackState = { ports: { ingest: port } };
  const got = await rememberedPort(state, "ingest");
  t.not(got, port);
  t.equal(state.ports.ingest, got);
});

t.test("the ports a stack derives from its base port are not handed out by another process", async (t) => {
  // A test stack on a free base port listens on base+2 for workers and more: another file picking
  // a free port meanwhile must not be given one of them (EADDRINUSE at the stack's start).
  let base = 20_000 + Math.floor(Math.random() * 11_000);
  while (portClaimed(base) || portClaimed(base + 2)) base += 200;
  const ports = await choosePorts({ dataDir: "", basePort: base }, { ports: {} });
  t.equal(ports.workers, base + 2);
  for (const port of Object.values(ports)) t.ok(portClaimed(port), `${port} claimed`);
  // Another process asks for a free port among the stack's ports alone: none may be handed out
  // (and, answering "no free port", it claims none of its own).
  const taken = Object.values(ports);
  const other = await new Promise<string>((resolve, reject) => {
    const script = `const { freePort } = await import(${JSON.stringify(join(ROOT, "libs/devstack/dist/index.js"))});
      const mine = new Set(${JSON.stringify(taken)}); const avoid = [];
      for (let p = 20000; p < 32000; p++) if (!mine.has(p)) avoid.push(p);
      try { process.stdout.write(String(await freePort(avoid))); } catch { process.stdout.write("none"); }`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}`))));
  });
  t.equal(other, "none", "none of the stack's ports handed to the other process");
});
