// npm run bench:apps: how long each app takes from spawn to ready, and its resident memory
// after idling, against a bare Hono hello-world process measured in the same run; last the four
// apps in one process (apps/standalone), against the four processes' sum.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { APPS, spawnApp, startStack, waitReady } from "@notify/devstack";
import { freePort, freshDatabase, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import { startHello } from "./lib.mjs";

const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 5);
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

const { url } = await freshDatabase(t);
const namespace = freshNamespace(t);
// Migrations, seed and topology once, so each app's start is measured as in production.
const prep = await startStack({
  dataDir: mkdtempSync(join(tmpdir(), "notify-bench-")),
  databaseUrl: url,
  natsUrl: TEST_NATS_URL,
  namespace,
  basePort: 0,
  ports: { sandbox: await freePort() },
  apps: [],
  seed: true,
});

const rows = [];
let started = performance.now();
const helloPort = await freePort();
const hello = await startHello(helloPort);
const helloMs = performance.now() - started;
await sleep(idleSeconds * 1000);
rows.push({ app: "hono hello-world", ms: helloMs, rss: rssMb(hello.pid) });
hello.kill();

for (const app of APPS) {
  const port = await freePort();
  // Ingest and receipts answer readiness on their operator's port; the others on their only one.
  const readyPort = app === "ingest" || app === "receipts" ? await freePort() : port;
  started = performance.now();
  const proc = spawnApp(app, {
    ADMIN_PORT: String(readyPort),
    DATABASE_URL: url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: namespace,
    PORT: String(port),
    HOST: "127.0.0.1",
    EMAIL_PROVIDER: "sandbox",
    SENDGRID_API_KEY: "SG.sandbox",
    SENDGRID_BASE_URL: prep.sandboxUrl,
    CURSOR_SECRET: "bench-cursor-secret-0123456789abcdef",
  });
  await waitReady(`http://127.0.0.1:${readyPort}/readyz`, 30_000, () => proc.child.exitCode === null);
  const ms = performance.now() - started;
  await sleep(idleSeconds * 1000);
  rows.push({ app, ms, rss: rssMb(proc.child.pid) });
  await proc.stop();
}
// The four apps in one process (apps/standalone): ready once each of the four answers.
{
  const ports = {
    INGEST_PORT: await freePort(),
    INGEST_ADMIN_PORT: await freePort(),
    PROCESSOR_PORT: await freePort(),
    WORKERS_PORT: await freePort(),
    RECEIPTS_PORT: await freePort(),
    RECEIPTS_ADMIN_PORT: await freePort(),
  };
  started = performance.now();
  const proc = spawnApp("standalone", {
    ...Object.fromEntries(Object.entries(ports).map(([name, port]) => [name, String(port)])),
    DATABASE_URL: url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: namespace,
    HOST: "127.0.0.1",
    EMAIL_PROVIDER: "sandbox",
    SENDGRID_API_KEY: "SG.sandbox",
    SENDGRID_BASE_URL: prep.sandboxUrl,
    CURSOR_SECRET: "bench-cursor-secret-0123456789abcdef",
  });
  const alive = () => proc.child.exitCode === null;
  await Promise.all(
    ["INGEST_ADMIN_PORT", "PROCESSOR_PORT", "WORKERS_PORT", "RECEIPTS_ADMIN_PORT"].map((name) =>
      waitReady(`http://127.0.0.1:${ports[name]}/readyz`, 30_000, alive),
    ),
  );
  const ms = performance.now() - started;
  await sleep(idleSeconds * 1000);
  rows.push({ app: "all four in one", ms, rss: rssMb(proc.child.pid) });
  await proc.stop();
}
await prep.stop();
for (const fn of teardowns.reverse()) await fn();

const base = rows[0];
console.log(`\nstart to ready, and RSS after ${idleSeconds} s idle (baseline: ${base.app})`);
for (const r of rows) {
  console.log(
    `${r.app.padEnd(18)} ${r.ms.toFixed(0).padStart(6)} ms (x${(r.ms / base.ms).toFixed(2)})   ${r.rss.toFixed(1).padStart(6)} MB (x${(r.rss / base.rss).toFixed(2)})`,
  );
}
const four = rows.filter((r) => APPS.includes(r.app)).reduce((sum, r) => sum + r.rss, 0);
const one = rows.find((r) => r.app === "all four in one")?.rss ?? Number.NaN;
console.log(
  `RSS of the four apps: ${four.toFixed(1)} MB as four processes, ${one.toFixed(1)} MB in one (x${(one / four).toFixed(2)})`,
);
