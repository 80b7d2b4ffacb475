import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { eventually, freePort, freshDatabase, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { consoleRefusal, isLoopbackHost } from "../src/console/security.js";

// Where the console is served: its sign-in form carries an operator key and its cookie a
// session, so on an interface beyond this machine it is served only when a TLS proxy serves it
// to browsers (CONSOLE_TLS); otherwise it is off, and ingest says so at start.

t.test("loopback is this machine's own interfaces, however written", async (t) => {
  for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost"]) {
    t.ok(isLoopbackHost(host), host);
  }
  for (const host of ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "::ffff:10.0.0.1", "ingest", "example.com", ""]) {
    t.notOk(isLoopbackHost(host), host || "(empty)");
  }
});

t.test("off beyond loopback unless served over TLS; the refusal says what to set", async (t) => {
  t.equal(consoleRefusal({ host: "127.0.0.1", tls: false }), undefined);
  t.equal(consoleRefusal({ host: "0.0.0.0", tls: true }), undefined);
  const refusal = consoleRefusal({ host: "0.0.0.0", tls: false });
  t.match(refusal, /ADMIN_HOST 0\.0\.0\.0 is not a loopback address/);
  t.match(refusal, /CONSOLE_TLS=true/);
  t.match(refusal, /ADMIN_HOST=127\.0\.0\.1/);
  t.match(refusal, /CONSOLE_ENABLED=false/);
});

const { url: databaseUrl } = await freshDatabase(t);
const namespace = freshNamespace(t);
const root = fileURLToPath(new URL("../../..", import.meta.url));

/** Ingest as its own process, from source, with `settings` over a test stack's; answers its log lines as they come. */
async function startIngest(settings: Record<string, string>) {
  const port = await freePort();
  const adminPort = await freePort();
  const lines: string[] = [];
  const child: ChildProcess = spawn(
    process.execPath,
    ["--conditions=@notify/source", "--import=tsx", "apps/ingest/src/main.ts"],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        DATABASE_URL: databaseUrl,
        NATS_URL: TEST_NATS_URL,
        NATS_NAMESPACE: namespace,
        LANE_PARTITIONS: "2",
        CURSOR_SECRET: "x".repeat(32),
        PORT: String(port),
        HOST: "127.0.0.1",
        ADMIN_PORT: String(adminPort),
        LOG_LEVEL: "info",
        ...settings,
      },
    },
  );
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => lines.push(line));
  }
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await once(child, "exit");
  });
  const admin = `http://127.0.0.1:${adminPort}`;
  await eventually(
    async () => ((await fetch(`${admin}/readyz`).catch(() => null))?.ok ? true : undefined),
    60_000,
    `ingest ready (${lines.slice(-5).join(" | ")})`,
  );
  return { admin, lines };
}

const warnings = (lines: string[]) =>
  lines.flatMap((line) => {
    try {
      const entry = JSON.parse(line) as { level: number; msg: string };
      return entry.level === 40 ? [entry.msg] : [];
    } catch {
      return [];
    }
  });

t.test("on a shared interface without CONSOLE_TLS: /console answers 404, and the log says why", async (t) => {
  const { admin, lines } = await startIngest({ ADMIN_HOST: "0.0.0.0" });
  t.equal((await fetch(`${admin}/console/login`)).status, 404);
  t.equal((await fetch(`${admin}/console`, { redirect: "manual" })).status, 404);
  t.equal((await fetch(`${admin}/readyz`)).status, 200, "the operator's port itself serves");
  t.match(warnings(lines), [/the console is off: ADMIN_HOST 0\.0\.0\.0 .*CONSOLE_TLS=true/]);
});

t.test("the same interface with CONSOLE_TLS: served, no warning", async (t) => {
  const { admin, lines } = await startIngest({ ADMIN_HOST: "0.0.0.0", CONSOLE_TLS: "true" });
  t.equal((await fetch(`${admin}/console/login`)).status, 200);
  t.notMatch(warnings(lines).join("\n"), /console/);
});

t.test("turned off on purpose: 404 and no warning", async (t) => {
  const { admin, lines } = await startIngest({ ADMIN_HOST: "0.0.0.0", CONSOLE_ENABLED: "false" });
  t.equal((await fetch(`${admin}/console/login`)).status, 404);
  t.notMatch(warnings(lines).join("\n"), /console/);
});
