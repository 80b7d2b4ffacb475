import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createLogger } from "@notify/log";
import { eventually, freePort, freshDatabase, freshNamespace, startTestStack, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import * as v from "valibot";
import { StandaloneConfig } from "../src/config.js";
import { appEnvironments, startAll } from "../src/run.js";

const refused = async (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then(
    () => false,
    () => true,
  );

t.test("each app is given its own ports; the process's PORT and ADMIN_PORT reach none of them", async (t) => {
  const config = v.parse(StandaloneConfig, {
    INGEST_PORT: "4000",
    INGEST_ADMIN_PORT: "4100",
    PROCESSOR_PORT: "4001",
    WORKERS_PORT: "4002",
    RECEIPTS_PORT: "4003",
    RECEIPTS_ADMIN_PORT: "4103",
  });
  const envs = appEnvironments({ PORT: "9999", ADMIN_PORT: "9998", DATABASE_URL: "postgres://db/x" }, config);
  t.same(
    Object.fromEntries(Object.entries(envs).map(([app, env]) => [app, [env.PORT, env.ADMIN_PORT]])),
    {
      ingest: ["4000", "4100"],
      processor: ["4001", "9998"],
      workers: ["4002", "9998"],
      receipts: ["4003", "4103"],
    },
    "ADMIN_PORT is only read by ingest and receipts, each given its own",
  );
  t.ok(
    Object.values(envs).every((env) => env.DATABASE_URL === "postgres://db/x"),
    "every other setting is shared",
  );
});

t.test("an app that cannot start stops the ones already running, and the error is thrown", async (t) => {
  const { url } = await freshDatabase(t);
  // Ingest starts last; its port is taken, so the three before it must be stopped again (they
  // finish what they hold before the process exits).
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => taken.close(resolve)));
  const ingestPort = (taken.address() as { port: number }).port;
  const ports = {
    PROCESSOR_PORT: await freePort(),
    WORKERS_PORT: await freePort(),
    RECEIPTS_PORT: await freePort(),
    RECEIPTS_ADMIN_PORT: await freePort(),
  };
  const env = {
    DATABASE_URL: url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: freshNamespace(t),
    LANE_PARTITIONS: "2",
    HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    CURSOR_SECRET: "standalone-test-cursor-secret-0123456789",
    INGEST_PORT: String(ingestPort),
    INGEST_ADMIN_PORT: String(await freePort()),
    ...Object.fromEntries(Object.entries(ports).map(([name, port]) => [name, String(port)])),
  };
  const config = v.parse(StandaloneConfig, env);
  await t.rejects(startAll(env, config, createLogger({ name: "standalone", level: "silent" })), /EADDRINUSE/);
  for (const [name, port] of Object.entries(ports)) t.ok(await refused(port), `${name} is closed again`);
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
  // The SendGrid sandbox posts its event to receipts, in the same process: stored and applied.
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
  for (const name of ["ingest", "ingestAdmin", "processor", "workers", "receipts", "receiptsAdmin"] as const) {
    t.ok(await refused(stack.ports[name]), `${name}'s port is closed`);
  }
});
