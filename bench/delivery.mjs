// npm run bench:delivery: sends per second of one worker process against the SendGrid sandbox
// (real Postgres and NATS; every send claims the guard, takes a token of the provider's shared
// bucket, goes through the breaker and writes its attempt and status), against raw
// @sendgrid/mail sends to the same sandbox measured in the same run with the same concurrency.
import { fork, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Client } from "@sendgrid/client";
import { MailService } from "@sendgrid/mail";

const API_KEY = "SG.bench";
const mail = (i) => ({
  to: `bench-${i}@example.com`,
  from: "notifications@example.com",
  subject: "Welcome, Ada!",
  html: "<h1>Hello Ada</h1><p>Thanks for joining.</p>",
  text: "Hello Ada\nThanks for joining.",
});

// The baseline runs in a child process of its own, as the worker does.
if (process.argv[2] === "--baseline") {
  const [url, seconds, concurrency] = [process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
  const client = new Client();
  client.setApiKey(API_KEY);
  client.setDefaultRequest("baseUrl", url);
  const service = new MailService();
  service.setClient(client);
  let sent = 0;
  let counting = false;
  const deadline = Date.now() + 1000 + seconds * 1000;
  setTimeout(() => (counting = true), 1000);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        await service.send(mail(sent));
        if (counting) sent++;
      }
    }),
  );
  process.send?.({ rate: sent / seconds });
  process.exit(0);
}

const { spawnApp, waitReady } = await import("@notify/devstack");
const { connectBus } = await import("@notify/bus");
const { freePort, freshDatabase, freshNamespace, TEST_NATS_URL } = await import("@notify/testing");

const ITEMS = Number(process.env.BENCH_ITEMS ?? 4000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const root = join(fileURLToPath(new URL(".", import.meta.url)), "..");
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startSandbox() {
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, "libs/devstack/dist/sandbox-cli.js")], {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", SANDBOX_API_KEY: API_KEY },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((resolve) => createInterface({ input: child.stdout }).once("line", resolve));
  teardowns.push(() => child.kill());
  return `http://127.0.0.1:${port}`;
}

function baseline(url) {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ["--baseline", url, String(SECONDS), String(CONCURRENCY)]);
    child.once("message", (m) => resolve(m.rate));
    child.once("exit", (code) => code !== 0 && reject(new Error(`baseline exited ${code}`)));
  });
}

async function worker(sandboxUrl) {
  const { url, database } = await freshDatabase(t);
  const namespace = freshNamespace(t);
  const bus = await connectBus({ servers: TEST_NATS_URL, name: "bench", namespace, partitions: 1 });
  const ids = Array.from({ length: ITEMS }, () => randomUUID());
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'bench', 'u-' || id, 'account', 'welcome', 'transactional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;
  await database.sql`insert into notification_channels (notification_id, channel, status)
    select id, 'email', 'pending' from unnest(${ids}::text[]) id`;

  const port = await freePort();
  const proc = spawnApp("workers", {
    DATABASE_URL: url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: namespace,
    LANE_PARTITIONS: "1",
    PORT: String(port),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    EMAIL_PROVIDER: "sandbox",
    SENDGRID_API_KEY: API_KEY,
    SENDGRID_BASE_URL: sandboxUrl,
    TRANSACTIONAL_CONCURRENCY: String(CONCURRENCY),
    // The pipeline is measured, not a contractual limit: the bucket is still taken per send.
    PROVIDER_RATE_DEFAULT: "1000000",
  });
  await waitReady(`http://127.0.0.1:${port}/readyz`, 30_000, () => proc.child.exitCode === null);
  for (let i = 0; i < ids.length; i += 256) {
    await Promise.all(
      ids.slice(i, i + 256).map((id, j) =>
        bus.publish(
          bus.subjects.work("email", "transactional"),
          {
            notification_id: id,
            channel: "email",
            priority: "transactional",
            user_id: `u-${id}`,
            category: "account",
            to: mail(i + j).to,
            subject: mail(0).subject,
            body: mail(0).html,
            attempt: 0,
          },
          `${id}:email`,
        ),
      ),
    );
  }
  const accepted = async () => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(/^notify_provider_sends_total\{[^}]*result="accepted"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  };
  // The steady rate: from 10% to 90% of the backlog, leaving out warm-up and the tail.
  let from;
  for (;;) {
    const n = await accepted();
    const now = performance.now();
    if (from === undefined && n >= ITEMS * 0.1) from = { n, now };
    if (from !== undefined && n >= ITEMS * 0.9) {
      const [{ delivered }] = await database.sql`
        select count(*)::int as delivered from notification_channels where status = 'delivered'`;
      await proc.stop();
      await bus.close();
      return { rate: ((n - from.n) * 1000) / (now - from.now), delivered };
    }
    if (proc.child.exitCode !== null) throw new Error("the worker exited");
    await sleep(100);
  }
}

try {
  const sandboxUrl = await startSandbox();
  // The baseline runs before and after the worker: on a shared machine the load changes.
  const before = await baseline(sandboxUrl);
  const notify = await worker(sandboxUrl);
  const after = await baseline(sandboxUrl);
  const raw = (before + after) / 2;
  const fmt = (n) => `${n.toFixed(0).padStart(6)} sends/s`;
  console.log(`\nSendGrid sandbox (own process), ${CONCURRENCY} sends in flight`);
  console.log(
    `raw @sendgrid/mail              ${fmt(raw)}   (mean of ${before.toFixed(0)} before and ${after.toFixed(0)} after, ${SECONDS} s each)`,
  );
  console.log(
    `notify worker, one process      ${fmt(notify.rate)}   (${ITEMS} work items, ${notify.delivered} delivered)`,
  );
  console.log(`ratio (worker / raw sends/s): ${(notify.rate / raw).toFixed(3)}`);
  console.log("plan: about 200 sends/s per push worker");
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
