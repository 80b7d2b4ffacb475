import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ROOT, SAMPLE_NOTIFICATION } from "@notify/devstack";
import {
  devKey,
  eventually,
  getWithCa,
  npmStart,
  postNotification,
  serversAlive,
  settledView,
  stackEnv,
  TEST_NATS_URL,
} from "@notify/testing";
import t from "tap";

// A newcomer's first hour on the embedded default: `npm start` with no configuration, then the
// commands its banner prints, the notify CLI with no environment, a second start on a folder in
// use, npm start killed on its own (the servers must not outlive it), and two stacks on one
// shared NATS that never meet.
const run = promisify(execFile);
const folders: string[] = [];
const runs: Array<ReturnType<typeof npmStart>> = [];
const folder = () => {
  const dir = mkdtempSync(join(tmpdir(), "notify-newcomer-"));
  folders.push(dir);
  return dir;
};
t.teardown(async () => {
  for (const started of runs) {
    try {
      process.kill(-(started.child.pid as number), "SIGTERM");
    } catch {}
    await started.exited;
  }
  for (const dir of folders) {
    await eventually(async () => (serversAlive(dir) ? undefined : true), 20_000, "the servers to stop").catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
const start = (dataDir: string, env: Record<string, string> = {}) => {
  const started = npmStart(dataDir, env);
  runs.push(started);
  return started;
};

const dataDir = folder();
const first = start(dataDir);
await first.running;
const env = stackEnv(dataDir);
const key = devKey(dataDir);
const auth = { authorization: `Bearer ${key}` };
const banner = first.output.join("\n");

t.test("the banner prints every command a newcomer needs, with the real addresses", async (t) => {
  t.match(banner, `curl -sS -X POST ${env.NOTIFY_BASE_URL}/api/v1/notifications`);
  t.match(banner, `Authorization: Bearer ${key}`);
  t.match(banner, "embedded PostgreSQL");
  t.match(banner, /own nats-server at nats:\/\/127\.0\.0\.1:\d+/);
  t.notMatch(banner, ":4222", "never someone else's NATS");
  t.match(banner, `curl -sS ${env.SENDGRID_SANDBOX_URL}/sandbox/messages`);
  t.match(banner, `--cacert ${env.PUSH_SANDBOX_CA} ${env.PUSH_SANDBOX_URL}/sandbox/messages`);
  t.match(banner, "/inbox-tokens");
  t.match(banner, "npx notify dlq list");
  t.match(banner, /Inbox demo: http:\/\/127\.0\.0\.1:\d+\//);
});

t.test("the inbox demo the banner prints answers, and mints user-123's token without showing the key", async (t) => {
  const demo = /Inbox demo: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(banner)?.[1];
  if (demo === undefined) return t.fail("the banner prints the demo's URL");
  const page = await fetch(demo);
  t.equal(page.status, 200);
  const html = await page.text();
  t.match(html, "<notify-inbox");
  t.notMatch(html, key, "the page never holds the key");
  t.equal((await fetch(`${demo}notify-inbox.js`)).status, 200, "the elements' bundle is served");
  const minted = (await (await fetch(`${demo}token`, { method: "POST" })).json()) as { token: string };
  const inbox = await fetch(`${env.NOTIFY_BASE_URL}/api/v1/inbox`, { headers: { "x-inbox-token": minted.token } });
  t.equal(inbox.status, 200, "its token opens user-123's inbox");
});

t.test("the console the banner prints answers there, and the dev key signs in", async (t) => {
  const consoleUrl = /Console: +(http:\/\/127\.0\.0\.1:\d+\/console)\s/.exec(banner)?.[1];
  if (consoleUrl === undefined) return t.fail("the banner prints the console's URL");
  t.not(
    new URL(consoleUrl).origin,
    new URL(env.NOTIFY_BASE_URL as string).origin,
    "on the operator's port, not the API's",
  );
  t.equal((await fetch(`${consoleUrl}/login`)).status, 200);
  const signedIn = await fetch(`${consoleUrl}/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ key }),
  });
  t.equal(signedIn.status, 303);
  t.match(signedIn.headers.get("set-cookie"), /^notify_console=/);
});

t.test("the printed curl delivers on all four channels; each sandbox shows what it received", async (t) => {
  const id = await postNotification(env.NOTIFY_BASE_URL as string, key, SAMPLE_NOTIFICATION);
  const view = await settledView(env.NOTIFY_BASE_URL as string, key, id);
  t.equal(view.status, "completed");
  t.equal(Object.values(view.channels).filter((c) => c.status === "delivered").length, 4, "on all four channels");
  const mails = (await (await fetch(`${env.SENDGRID_SANDBOX_URL}/sandbox/messages`)).json()) as { data: unknown[] };
  t.ok(mails.data.length >= 1, "SendGrid's sandbox lists the email");
  const pushes = (await getWithCa(
    `${env.PUSH_SANDBOX_URL}/sandbox/messages`,
    readFileSync(env.PUSH_SANDBOX_CA as string, "utf8"),
  )) as { data: Array<{ payload: string }> };
  t.ok(
    pushes.data.some((m) => m.payload.includes(id)),
    "the push sandbox shows the decrypted push, with the printed --cacert",
  );

  // The in-app inbox, as the banner shows it: mint a token with the key, then list with the token.
  const minted = (await (
    await fetch(`${env.NOTIFY_BASE_URL}/api/v1/users/user-123/inbox-tokens`, { method: "POST", headers: auth })
  ).json()) as { token: string };
  const inbox = await fetch(`${env.NOTIFY_BASE_URL}/api/v1/inbox`, { headers: { "x-inbox-token": minted.token } });
  t.equal(inbox.status, 200);
  t.match(await inbox.text(), id, "the inbox lists the notification");
});

t.test("the banner's webhook commands register the receiver, which then verifies every post", async (t) => {
  // The three lines the banner prints, run by a shell as a newcomer pastes them.
  const lines = banner.split("\n");
  const from = lines.findIndex((line) => line.trim().startsWith("SECRET=$(curl"));
  t.ok(from > 0, "the banner prints the webhook commands");
  const script = lines
    .slice(from, from + 3)
    .map((line) => line.trim())
    .join("\n");
  t.match(script, `${env.WEBHOOK_SANDBOX_URL}/sandbox/received`);
  const { stdout } = await run("bash", ["-c", script], { cwd: ROOT, env: { PATH: process.env.PATH ?? "" } });
  t.equal(stdout.trim(), "[]", "the secret was taken and nothing received yet");
  const id = await postNotification(env.NOTIFY_BASE_URL as string, key, SAMPLE_NOTIFICATION);
  const posts = await eventually(
    async () => {
      const list = (await (await fetch(`${env.WEBHOOK_SANDBOX_URL}/sandbox/received?name=dev`)).json()) as Array<{
        type: string;
        verified: boolean;
        body: { data: { notification_id: string } };
      }>;
      const mine = list.filter((p) => p.body.data.notification_id === id);
      // Posts may arrive in any order (a retried one after a later event), so wait for them all.
      const delivered = mine.filter((p) => p.type === "channel.delivered").length;
      return delivered >= 4 && mine.some((p) => p.type === "notification.completed") ? mine : undefined;
    },
    30_000,
    "the notification's webhook events",
  );
  t.ok(
    posts.every((p) => p.verified),
    "every post verified with the secret the banner's commands gave it",
  );
  t.ok(posts.filter((p) => p.type === "channel.delivered").length >= 4, "a delivered event per channel");
});

t.test("the notify CLI works next to npm start with no environment at all", async (t) => {
  const cli = join(ROOT, "node_modules", ".bin", "notify");
  const { stdout } = await run(cli, ["keys", "list"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", DATA_DIR: dataDir },
  });
  t.match(stdout, "development key");
  const dlq = await run(cli, ["dlq", "list"], { cwd: ROOT, env: { PATH: process.env.PATH ?? "", DATA_DIR: dataDir } });
  t.match(dlq.stdout, /no dead letters|SEQ/);
  const hooks = await run(cli, ["webhooks", "list"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", DATA_DIR: dataDir },
  });
  t.match(hooks.stdout, /no webhook endpoints|\/hooks\/dev/);
});

t.test("a second npm start on a folder in use refuses with a clear message", async (t) => {
  const second = start(dataDir);
  await t.rejects(second.running, /another notify stack is running on/);
});

t.test(
  "run as root inside a folder the postgres user cannot enter, it says so and how to fix it",
  { skip: process.getuid?.() !== 0 && "only as root does the server run as another user" },
  async (t) => {
    const locked = folder();
    const started = start(join(locked, "data"));
    await t.rejects(started.running, /cannot enter .*chmod o\+x/s);
  },
);

t.test("npm start killed on its own leaves no server behind", async (t) => {
  const demo = /Inbox demo: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(banner)?.[1] as string;
  process.kill(-(first.child.pid as number), "SIGKILL");
  await first.exited;
  await eventually(async () => (serversAlive(dataDir) ? undefined : true), 20_000, "Postgres and NATS to stop");
  t.pass("the supervisor stopped Postgres and nats-server once npm start was gone");
  await eventually(
    async () =>
      (await fetch(demo).then(
        () => "answers",
        () => "gone",
      )) === "gone"
        ? true
        : undefined,
    20_000,
    "the inbox demo to stop",
  );
  t.pass("and the watcher stopped the inbox demo");
});

t.test("with NATS_URL, each data folder keeps to a namespace of its own on the shared server", async (t) => {
  const [a, b] = [folder(), folder()];
  const stackA = start(a, { NATS_URL: TEST_NATS_URL });
  const stackB = start(b, { NATS_URL: TEST_NATS_URL });
  await Promise.all([stackA.running, stackB.running]);
  const [envA, envB] = [stackEnv(a), stackEnv(b)];
  t.match(envA.NATS_NAMESPACE, /^notify[0-9a-f]{8}$/);
  t.not(envA.NATS_NAMESPACE, envB.NATS_NAMESPACE, "two stacks, two namespaces");
  t.equal(envA.NATS_URL, TEST_NATS_URL);
  for (const [dir, e] of [
    [a, envA],
    [b, envB],
  ] as const) {
    const id = await postNotification(e.NOTIFY_BASE_URL as string, devKey(dir), {
      ...SAMPLE_NOTIFICATION,
      channels: ["email"],
    });
    t.equal((await settledView(e.NOTIFY_BASE_URL as string, devKey(dir), id)).status, "completed");
  }
  const mailsA = (await (await fetch(`${envA.SENDGRID_SANDBOX_URL}/sandbox/messages`)).json()) as { data: unknown[] };
  t.equal(mailsA.data.length, 1, "each stack delivered its own notification, and only its own");
  // Clean the shared server's streams of both namespaces.
  for (const [started, ns] of [
    [stackA, envA.NATS_NAMESPACE],
    [stackB, envB.NATS_NAMESPACE],
  ] as const) {
    process.kill(-(started.child.pid as number), "SIGTERM");
    await started.exited;
    const { deleteNamespace } = await import("@notify/testing");
    await deleteNamespace(ns as string);
  }
});
