// npm run bench:delivery: one worker process sending email to the SendGrid sandbox (real
// Postgres and NATS; every send claims the guard, takes a token of the provider's shared bucket,
// goes through the breaker and writes its attempt and status), against two references measured
// in the same run with the same concurrency and sandbox: raw @sendgrid/mail sends (no durable
// work at all), and the least durable send (bench/floor-delivery.mjs), alone and with the checks
// every send must also pass (item validated, channel read, shared rate bucket, text/plain
// alternative). For each: sends per second and the CPU per send of the sender, postgres and
// nats-server, from /proc (the sandbox is not counted). The ratios to the floors in CPU per send
// are printed last. Every sender is measured after the same warm-up: BENCH_WARM_MS of sending.
// The worker runs as shipped (LOG_LEVEL info) but for the provider's rate, which it lifts
// (PROVIDER_RATE_DEFAULT; the bucket is still taken per send). The backlog sits in a database
// in the run's state (BENCH_DB_STATE: fresh, or a copy of the history template, bench/lib.mjs;
// never analysed). BENCH_ITEMS (20,000 a sender), BENCH_WARM_MS (3000: not measured),
// BENCH_CONCURRENCY (32), BENCH_SECONDS (8: the raw client's run), BENCH_DB_STATE.
// BENCH_CPU_PROF_DIR=<dir> writes the worker's and the floor's V8 CPU profiles there;
// BENCH_NODE_OPTIONS adds Node.js options to the worker and the floors (docs/benchmarks.md#profiles).
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
  let cpu;
  // The same warm-up as the senders it is compared with.
  const warmMs = Number(process.argv[6]);
  const deadline = Date.now() + warmMs + seconds * 1000;
  setTimeout(() => {
    counting = true;
    cpu = process.cpuUsage();
  }, warmMs);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        await service.send(mail(sent));
        if (counting) sent++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  process.send?.({ rate: sent / seconds, cpuUs: (used.user + used.system) / sent });
  process.exit(0);
}

const { spawnApp, waitReady } = await import("@notify/devstack");
const { applyTopology, connectBus } = await import("@notify/bus");
const {
  benchDatabase,
  benchNodeOptions,
  cpuBetween,
  cpuTicks,
  dbState,
  floorExecArgv,
  forkChild,
  profileEnv,
  spawnChild,
  summarize,
} = await import("./lib.mjs");
const { freePort, freshNamespace, TEST_NATS_URL } = await import("@notify/testing");

const ITEMS = Number(process.env.BENCH_ITEMS ?? 20_000);
// Every sender, the raw client too, is measured once it has sent for this long (or, should the
// backlog run that low first, from half of it): before that much of its CPU is V8 compiling its
// code, the more of it the larger the program.
const WARM_MS = Number(process.env.BENCH_WARM_MS ?? 3000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const root = join(fileURLToPath(new URL(".", import.meta.url)), "..");
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startSandbox() {
  const port = await freePort();
  const child = spawnChild(process.execPath, [join(root, "libs/devstack/dist/sandbox-cli.js")], {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", SANDBOX_API_KEY: API_KEY },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((resolve) => createInterface({ input: child.stdout }).once("line", resolve));
  teardowns.push(() => child.kill());
  return `http://127.0.0.1:${port}`;
}

function baseline(url) {
  return new Promise((resolve, reject) => {
    const args = ["--baseline", url, String(SECONDS), String(CONCURRENCY), String(WARM_MS)];
    const child = forkChild(fileURLToPath(import.meta.url), args, {
      execArgv: floorExecArgv(),
    });
    child.once("message", resolve);
    child.once("exit", (code) => code !== 0 && reject(new Error(`baseline exited ${code}`)));
  });
}

const fmtGroups = (r) =>
  r.cpu === null
    ? "no /proc"
    : Object.entries(r.cpu)
        .map(([group, us]) => `${group} ${(us / r.sends).toFixed(0)}`)
        .join(", ");

/** Work items for ITEMS pending email channels, on a database in the run's state and a fresh namespace. */
async function backlog() {
  const { url, database } = await benchDatabase(t);
  const namespace = freshNamespace(t);
  const bus = await connectBus({ servers: TEST_NATS_URL, name: "bench", namespace, partitions: 1 });
  await applyTopology(bus);
  const ids = Array.from({ length: ITEMS }, () => randomUUID());
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'bench', 'u-' || id, 'account', 'welcome', 'transactional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;
  await database.sql`insert into notification_channels (notification_id, channel, status, user_id)
    select id, 'email', 'pending', 'u-' || id from unnest(${ids}::text[]) id`;
  // The status history written before the backlog's: the senders' deliveries are counted after it.
  const last = await statusEvents(database.sql);
  const publish = async () => {
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
  };
  return { url, database, namespace, bus, publish, last };
}

/**
 * The status events written so far, off their id sequence: each send of the backlog writes one
 * (pending to delivered). Counting the rows instead would scan the whole history, which is
 * partitioned by notification and has no index on its id alone.
 */
async function statusEvents(sql) {
  const [{ n }] = await sql`
    select case when is_called then last_value else 0 end::float8 as n from channel_status_events_id_seq`;
  return n;
}

/**
 * Sends per second and CPU per send (the sending process, postgres, nats-server; not the
 * sandbox) from the end of its warm-up (WARM_MS) to 90% of the backlog, leaving out the tail.
 * The deliveries are the status events written after `last` (statusEvents), so the poll costs
 * Postgres as little in a database with history as in a fresh one.
 */
async function drain(database, last, pid, alive) {
  const delivered = async () => (await statusEvents(database.sql)) - last;
  const groupOf = ({ pid: p, comm }) =>
    p === pid ? "sender" : comm === "postgres" || comm === "nats-server" ? comm : null;
  let from;
  let firstAt;
  for (;;) {
    const n = await delivered();
    const now = performance.now();
    if (firstAt === undefined && n > 0) firstAt = now;
    const warm = n > 0 && (now - firstAt >= WARM_MS || n >= ITEMS * 0.5);
    if (from === undefined && warm) from = { n, now, ticks: cpuTicks(groupOf) };
    if (from !== undefined && n >= ITEMS * 0.9) {
      const cpu = cpuBetween(from.ticks, cpuTicks(groupOf));
      const sends = n - from.n;
      const total = cpu && Object.values(cpu).reduce((a, b) => a + b, 0);
      return {
        rate: (sends * 1000) / (now - from.now),
        cpuUs: total === null ? Number.NaN : total / sends,
        cpu,
        sends,
      };
    }
    if (!alive()) throw new Error("the sender exited");
    await sleep(100);
  }
}

async function worker(sandboxUrl) {
  const { url, database, namespace, bus, publish, last } = await backlog();
  const port = await freePort();
  const proc = spawnApp(
    "workers",
    {
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: namespace,
      LANE_PARTITIONS: "1",
      PORT: String(port),
      HOST: "127.0.0.1",
      EMAIL_PROVIDER: "sandbox",
      SENDGRID_API_KEY: API_KEY,
      SENDGRID_BASE_URL: sandboxUrl,
      TRANSACTIONAL_CONCURRENCY: String(CONCURRENCY),
      // The pipeline is measured, not a contractual limit: the bucket is still taken per send.
      PROVIDER_RATE_DEFAULT: "1000000",
      ...profileEnv(),
    },
    undefined,
    benchNodeOptions(),
  );
  await waitReady(`http://127.0.0.1:${port}/readyz`, 30_000, () => proc.child.exitCode === null);
  await publish();
  const result = await drain(database, last, proc.child.pid, () => proc.child.exitCode === null);
  await proc.stop();
  await bus.close();
  return result;
}

async function floor(sandboxUrl, checks) {
  const { url, database, namespace, bus, publish, last } = await backlog();
  const child = forkChild(join(root, "bench/floor-delivery.mjs"), [], {
    execArgv: floorExecArgv(),
    env: {
      ...process.env,
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: namespace,
      SENDGRID_API_KEY: API_KEY,
      SENDGRID_BASE_URL: sandboxUrl,
      FLOOR_CONCURRENCY: String(CONCURRENCY),
      FLOOR_CHECKS: checks ? "1" : "0",
      ...profileEnv(),
    },
  });
  teardowns.push(() => child.kill());
  await new Promise((resolve) => child.once("message", resolve));
  await publish();
  const result = await drain(database, last, child.pid, () => child.exitCode === null);
  child.kill();
  await bus.close();
  return result;
}

try {
  const sandboxUrl = await startSandbox();
  // The baseline runs before and after the others: on a shared machine the load changes.
  const before = await baseline(sandboxUrl);
  const least = await floor(sandboxUrl, false);
  const checked = await floor(sandboxUrl, true);
  const notify = await worker(sandboxUrl);
  const after = await baseline(sandboxUrl);
  const raw = (before.rate + after.rate) / 2;
  const rawCpu = (before.cpuUs + after.cpuUs) / 2;
  const line = (name, rate, cpuUs, note) =>
    console.log(
      `${name.padEnd(32)}${rate.toFixed(0).padStart(6)} sends/s   ${cpuUs.toFixed(0).padStart(5)} µs CPU/send   ${note}`,
    );
  console.log(`\nSendGrid sandbox (own process, not counted), ${CONCURRENCY} sends in flight`);
  line(
    "raw @sendgrid/mail",
    raw,
    rawCpu,
    `(client only; mean of ${before.rate.toFixed(0)} before and ${after.rate.toFixed(0)} after)`,
  );
  line(
    "floor: durable send",
    least.rate,
    least.cpuUs,
    `(guard, send, guard, attempt + status + history; ${fmtGroups(least)})`,
  );
  line(
    "  + the send's checks",
    checked.rate,
    checked.cpuUs,
    `(+ item, channel read, bucket, text; ${fmtGroups(checked)})`,
  );
  line("notify worker, one process", notify.rate, notify.cpuUs, `(${fmtGroups(notify)})`);
  console.log(
    `database: ${dbState()}; the worker's provider rate lifted (PROVIDER_RATE_DEFAULT), otherwise as shipped`,
  );
  const toRaw = (r) => (r.rate / raw).toFixed(2);
  console.log(`ratio to raw sends/s: floor ${toRaw(least)}, + checks ${toRaw(checked)}, worker ${toRaw(notify)}`);
  console.log(`ratio (floor with the checks / worker CPU per send): ${(checked.cpuUs / notify.cpuUs).toFixed(2)}`);
  console.log(`ratio (floor / worker CPU per send): ${(least.cpuUs / notify.cpuUs).toFixed(2)}`);
  summarize({
    what: "one worker, one email sent",
    notify: { cpuUs: notify.cpuUs, rate: notify.rate },
    floor: { cpuUs: least.cpuUs, rate: least.rate },
    extra: {
      "floor with the checks": { cpuUs: checked.cpuUs, rate: checked.rate },
      "raw @sendgrid/mail": { cpuUs: rawCpu, rate: raw },
    },
    ratio: least.cpuUs / notify.cpuUs,
    command: "npm run bench:delivery",
  });
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
