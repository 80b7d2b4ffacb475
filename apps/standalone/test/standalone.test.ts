import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { createLogger } from "@notify/log";
import { eventually, freePort, freshDatabase, freshNamespace, startTestStack, TEST_NATS_URL } from "@notify/testing";
import t, { type Test } from "tap";
import * as v from "valibot";
import { StandaloneConfig } from "../src/config.js";
import { appEnvironments, startAll } from "../src/run.js";

const refused = async (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then(
    () => false,
    () => true,
  );

t.test("each app is given its own port(s) and interface; PORT, ADMIN_PORT and HOST are replaced", async (t) => {
  const config = v.parse(StandaloneConfig, {
    INGEST_PORT: "4000",
    INGEST_ADMIN_PORT: "4100",
    PROCESSOR_PORT: "4001",
    WORKERS_PORT: "4002",
    RECEIPTS_PORT: "4003",
    RECEIPTS_ADMIN_PORT: "4103",
    PROCESSOR_HOST: "10.0.0.2",
  });
  const envs = appEnvironments(
    { PORT: "9999", ADMIN_PORT: "9998", HOST: "0.0.0.0", DATABASE_URL: "postgres://db/x" },
    config,
  );
  t.same(Object.fromEntries(Object.entries(envs).map(([app, env]) => [app, [env.PORT, env.ADMIN_PORT, env.HOST]])), {
    ingest: ["4000", "4100", "0.0.0.0"],
    // The processor and the workers read no ADMIN_PORT: their one port is the operator's, on loopback.
    processor: ["4001", "9998", "10.0.0.2"],
    workers: ["4002", "9998", "127.0.0.1"],
    receipts: ["4003", "4103", "0.0.0.0"],
  });
  t.ok(
    Object.values(envs).every((env) => env.DATABASE_URL === "postgres://db/x"),
    "every other setting is shared",
  );
});

const PORTS = [
  "INGEST_PORT",
  "INGEST_ADMIN_PORT",
  "PROCESSOR_PORT",
  "WORKERS_PORT",
  "RECEIPTS_PORT",
  "RECEIPTS_ADMIN_PORT",
] as const;

type PortName = (typeof PORTS)[number];

/**
 * The four apps started in this process on a fresh database and namespace, each port free
 * unless `given`; answers them, their ports and a check that no app kept a PostgreSQL connection.
 */
async function startInProcess(t: Test, given: Partial<Record<PortName, number>> = {}) {
  const { url, database } = await freshDatabase(t);
  const ports = Object.fromEntries(
    await Promise.all(PORTS.map(async (name) => [name, given[name] ?? (await freePort())])),
  ) as Record<PortName, number>;
  const env = {
    DATABASE_URL: url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: freshNamespace(t),
    LANE_PARTITIONS: "2",
    INGEST_HOST: "127.0.0.1",
    RECEIPTS_HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    CURSOR_SECRET: "standalone-test-cursor-secret-0123456789",
    // A provider on: the workers then make its gate (breaker, token buckets) at start.
    EMAIL_PROVIDER: "sendgrid",
    SENDGRID_API_KEY: "SG.test",
    ...Object.fromEntries(Object.entries(ports).map(([name, port]) => [name, String(port)])),
  };
  const apps = startAll(env, v.parse(StandaloneConfig, env), createLogger({ name: "standalone", level: "silent" }));
  const connectionsLeft = async () => {
    const [left] = await database.sql<Array<{ n: number }>>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name like 'notify-%'`;
    return left?.n;
  };
  return { apps, ports, connectionsLeft };
}

/**
 * Starts the four apps with `taken`'s port held by another server: the start fails there, and
 * the apps started before it (whose ports in `ran` must have answered meanwhile) are stopped,
 * along with what the failing app had opened. A leftover handle (a timer, a socket) would keep
 * this test file from ending.
 */
async function failedStart(t: Test, taken: PortName, ran: PortName[]) {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => blocker.close(resolve)));
  const { apps, ports, connectionsLeft } = await startInProcess(t, {
    [taken]: (blocker.address() as { port: number }).port,
  });
  const seen = new Set<string>();
  let watching = true;
  const watch = (async () => {
    while (watching) {
      for (const name of ran) if (!(await refused(ports[name]))) seen.add(name);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  await t.rejects(apps.started, /EADDRINUSE/);
  watching = false;
  await watch;
  t.same([...seen].sort(), [...ran].sort(), "the apps before it were running");
  for (const name of PORTS.filter((n) => n !== taken)) t.ok(await refused(ports[name]), `${name} is closed again`);
  t.equal(await connectionsLeft(), 0, "no app kept a connection to PostgreSQL");
  await apps.stop();
  t.pass("stopping again after the failed start is harmless");
}

t.test("ingest cannot start: receipts, workers and the processor stop again, and the start fails", (t) =>
  failedStart(t, "INGEST_PORT", ["RECEIPTS_ADMIN_PORT", "PROCESSOR_PORT"]),
);
t.test("the workers cannot start: receipts stops again, and the start fails", (t) =>
  failedStart(t, "WORKERS_PORT", ["RECEIPTS_ADMIN_PORT"]),
);

t.test("a stop during the start stops what runs, and nothing starts after it", async (t) => {
  const { apps, ports, connectionsLeft } = await startInProcess(t);
  // Receipts, the first, is up: the workers are starting, or about to.
  await eventually(async () => ((await refused(ports.RECEIPTS_ADMIN_PORT)) ? undefined : true), 10_000, "receipts up");
  await apps.stop();
  t.equal(await apps.started, false, "the start ends without the four running");
  for (const name of PORTS) t.ok(await refused(ports[name]), `${name} is closed`);
  t.equal(await connectionsLeft(), 0, "no app kept a connection to PostgreSQL");
});

t.test("one app's wrong setting stops the process before any app starts (exit 78)", async (t) => {
  const { url } = await freshDatabase(t);
  const receiptsAdmin = await freePort();
  const child = spawn(process.execPath, [join(import.meta.dirname, "..", "dist", "main.js")], {
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: freshNamespace(t),
      INGEST_PORT: String(await freePort()),
      INGEST_ADMIN_PORT: String(await freePort()),
      PROCESSOR_PORT: String(await freePort()),
      WORKERS_PORT: String(await freePort()),
      RECEIPTS_PORT: String(await freePort()),
      RECEIPTS_ADMIN_PORT: String(receiptsAdmin),
      RECEIPTS_HOST: "127.0.0.1",
      // No CURSOR_SECRET: ingest, the last to start, refuses to run without one.
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  let receiptsRan = false;
  let done = false;
  void exited.then(() => {
    done = true;
  });
  while (!done) {
    if (!(await refused(receiptsAdmin))) receiptsRan = true;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  t.equal(await exited, 78);
  t.match(stderr, /CURSOR_SECRET/);
  t.notOk(receiptsRan, "receipts, the first to start, never ran");
});

t.test("the four apps in one process deliver on every channel and stop on SIGTERM", async (t) => {
  const { stack, auth } = await startTestStack(t, { oneProcess: true });
  const proc = stack.apps.get("ingest");
  t.ok(proc !== undefined && [...stack.apps.values()].every((p) => p === proc), "one process is every app's");
  const pid = proc?.child.pid as number;
  t.match(readFileSync(`/proc/${pid}/cmdline`, "utf8"), /apps\/standalone\/dist\/main\.js/);

  const response = await fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "user-123",
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
      channels: ["email", "sms", "push", "in_app"],
    }),
  });
  t.equal(response.status, 202);
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  const view = await eventually(
    async () => {
      const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth });
      const body = (await r.json()) as { status: string; channels: Record<string, { status: string }> };
      return body.status === "completed" ? body : undefined;
    },
    30_000,
    "the notification completed",
  );
  t.same(Object.fromEntries(Object.entries(view.channels).map(([channel, c]) => [channel, c.status])), {
    email: "delivered",
    sms: "delivered",
    push: "delivered",
    in_app: "delivered",
  });
  // The provider was called once: the workers in the same process claimed the send once.
  await eventually(
    async () => {
      const sandbox = await fetch(`${stack.sandboxUrl}/sandbox/messages?custom_arg.notification_id=${id}`);
      const mails = ((await sandbox.json()) as { data: unknown[] }).data;
      return mails.length === 1 ? true : undefined;
    },
    10_000,
    "one email reached SendGrid's sandbox",
  );

  const exited = proc?.exited as Promise<number | null>;
  process.kill(pid, "SIGTERM");
  t.equal(await exited, 0, "a clean stop of all four exits 0");
});
