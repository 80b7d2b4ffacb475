// npm run bench:e2e: the whole pipeline on this machine (the four apps, nats-server, PostgreSQL
// and the provider sandboxes), driven over HTTP: email only at a fixed rate and at saturation,
// all four channels at saturation, and transactional notifications while a promotional flood
// runs. For each phase: delivered/s, 202 -> delivered latency (p50, p99), and the CPU each
// process spent per delivered notification, read from /proc, until the last provider receipt
// was applied. Then email at the fixed rate and at saturation again with the four apps in one
// process (apps/standalone), as one machine runs them best. Last, the floor (bench/floor-pipeline.mjs: the same durable work per email in one
// minimal process) takes the email phases again (the fixed rate, then saturation), then the same
// floor split into four processes (accept, route, deliver, receipt; each with its own
// connections, as the apps run), then the floor with each stage's checks
// (bench/floor-checks.mjs: what a request, a lane message and a send must pass besides the
// durable work) in one process and in four, and the ratios of each floor's CPU per delivered
// email to the service's are printed, and each app's CPU per email against that of the
// four-process floors' stage doing its durable work, bare and with its checks. What every process spends idle is read before each service's and floor's
// phases (the least of three readings) and taken off them. Only the run's own processes are
// counted (the apps, floors and sandboxes it started, its PostgreSQL server and nats-server),
// process by process; a phase whose CPU cannot be right (a process not found or ended during it,
// one that spent nothing once its idle was taken off, or under 100 µs an email in all) stops the
// bench rather than print figures or ratios from it. Every process the bench starts is stopped
// however it ends (bench/lib.mjs). docs/capacity.md's sizing comes from here.
// The service runs as shipped (LOG_LEVEL info, its failover and limits) with one exception it
// names in its output: the providers' limits and the per-key rate limit are lifted, since the
// pipeline is measured, not a contract. Nothing is analysed: the database is as an operator's is,
// fresh (BENCH_DB_STATE=fresh, the default) or with a history of a million notifications
// (BENCH_DB_STATE=history, bench/lib.mjs), for the service and the floors alike. Each phase also
// counts the apps' "deadlock detected" and "will retry" log lines.
//   BENCH_EMAILS (6000), BENCH_RATE (150), BENCH_RATE_SECONDS (20), BENCH_MIXED (2000: the phase
//   with all four channels, reported per notification beside email only), BENCH_FLOOD (3000),
//   BENCH_SENDERS (48 concurrent senders; BENCH_CONCURRENCY is the same), BENCH_USERS (2000),
//   BENCH_CONTACTS_VIA_API=1 (the users get their contacts and push subscription through the
//   public API, one PUT each, instead of SQL), BENCH_CHANNELS (email, or mixed: the fixed-rate
//   and saturation phases send email, SMS, push and in-app per notification too, and the
//   email-only floors are not run), BENCH_PARTITIONS (16: the service's LANE_PARTITIONS).
//   An operator's probe: BENCH_USERS=1000 BENCH_CONTACTS_VIA_API=1 BENCH_SENDERS=64
//   BENCH_EMAILS=8000 npm run bench:e2e. BENCH_CPU_PROF_DIR=<dir>
//   writes each app's and floor's V8 CPU profile there (bench/cpu-profile.mjs), summarised by
//   bench/profile-top.mjs; BENCH_ALLOC_PROF=1 with it, their allocation profiles too;
//   BENCH_NODE_OPTIONS adds Node.js options to every app and floor (a profiler's, docs/benchmarks.md#profiles).
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDb } from "@notify/db";
import { startStack } from "@notify/devstack";
import { freePort, freshNamespace, postNotification, TEST_NATS_URL } from "@notify/testing";
import {
  benchDatabase,
  benchNodeOptions,
  cpuProblems,
  cpuSpent,
  cpuTicks,
  dbState,
  floorExecArgv,
  forkChild,
  onAbort,
  pgWork,
  pgWorkLines,
  processesOf,
  profileEnv,
  serverProcesses,
  stopChild,
  summarize,
  syscallCounts,
  syscallsBetween,
} from "./lib.mjs";

const EMAILS = Number(process.env.BENCH_EMAILS ?? 6000);
const RATE = Number(process.env.BENCH_RATE ?? 150);
const RATE_SECONDS = Number(process.env.BENCH_RATE_SECONDS ?? 20);
const MIXED = Number(process.env.BENCH_MIXED ?? 2000);
const FLOOD = Number(process.env.BENCH_FLOOD ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_SENDERS ?? process.env.BENCH_CONCURRENCY ?? 48);
const USERS = Number(process.env.BENCH_USERS ?? 2000);
const CONTACTS_VIA_API = process.env.BENCH_CONTACTS_VIA_API === "1";
const CHANNELS = process.env.BENCH_CHANNELS ?? "email";
if (!["email", "mixed"].includes(CHANNELS)) throw new Error(`BENCH_CHANNELS must be email or mixed: ${CHANNELS}`);
const ALL_CHANNELS = ["email", "sms", "push", "in_app"];
/** The channels of the fixed-rate and saturation phases. */
const PHASE_CHANNELS = CHANNELS === "mixed" ? ALL_CHANNELS : ["email"];
const DB_STATE = dbState();
/** Lane partitions of the service (LANE_PARTITIONS; the floor has one). */
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? 16);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
/** Runs the teardowns (databases, namespaces, the service, a floor), each once, last first. */
const tearDown = async () => {
  for (const fn of teardowns.splice(0).reverse()) await fn();
};
// A failure or a signal tears down too (then bench/lib.mjs stops every process the bench started).
onAbort(tearDown);

/**
 * The PostgreSQL and NATS servers of the run as this machine's processes (bench/lib.mjs
 * serverProcesses): found once the first service is up.
 */
let servers = null;
/**
 * What a process serving the pipeline is, to group its CPU and system calls by: this process,
 * the run's PostgreSQL server and nats-server, and the apps, sandboxes and floors this run
 * started. Another's (another bench's, a test's, one an earlier run left running) is not counted.
 */
const groupOf = (p) => {
  if (p.pid === process.pid) return "load generator";
  const server = servers ? servers.groupOf(p) : p.comm === "postgres" || p.comm === "nats-server" ? p.comm : null;
  if (server || !p.ours) return server;
  const app = /apps\/(ingest|processor|workers|receipts|standalone)\/dist\/main\.js/.exec(p.cmdline)?.[1];
  if (app) return app;
  if (/sandbox-cli\.js/.test(p.cmdline)) return "sandboxes";
  // A floor's process names its stages: the four-process floor's are counted one by one.
  const stages = /floor-pipeline\.mjs (\S+)/.exec(p.cmdline)?.[1];
  if (stages) return stages.includes(",") ? "floor" : `floor:${stages}`;
  return null;
};
/** CPU ticks so far of every process that serves the pipeline, grouped by what it is. */
const cpuSample = () => cpuTicks(groupOf);
/** Sampling both: `since(sample())` answers the CPU (µs), and the write system calls and wake-ups, between. */
const sample = () => ({ cpu: cpuSample(), calls: syscallCounts(groupOf) });
/** Also cpuSpent's `seen` and `ended`: what checkCpu needs to tell whether the CPU is right. */
const since = (before) => {
  const spent = cpuSpent(before.cpu, cpuSample());
  return {
    cpu: spent?.cpu ?? null,
    seen: spent?.seen ?? null,
    ended: spent?.ended ?? [],
    calls: syscallsBetween(before.calls, syscallCounts(groupOf)),
  };
};
/** The groups whose CPU a phase's figures sum: not this process, nor the sandboxes. */
const measured = (group) => group !== "load generator" && group !== "sandboxes";

/**
 * The least CPU per delivery the processes a figure sums (the service's apps, or a floor's
 * processes, with nats-server and PostgreSQL) can spend together: an email's durable work is
 * several statements and acknowledged publishes, over a millisecond on every machine measured
 * so far.
 */
const MIN_PIPELINE_US = 100;
/**
 * Refuses a phase's CPU that cannot be right (bench/lib.mjs cpuProblems), so that no figure or
 * ratio is printed from it: the bench fails instead. `cpu` is the phase's, idle taken off;
 * `spent` is since()'s; `groups` the processes its figures sum.
 */
function checkCpu(label, spent, cpu, delivered, groups) {
  const problems = cpuProblems({ spent, cpu, delivered, groups, leastUs: MIN_PIPELINE_US });
  if (problems.length > 0) {
    throw new Error(
      `${label}: the CPU measured cannot be right, and no figure or ratio is printed from it: ${problems.join("; ")}`,
    );
  }
}
/**
 * Write system calls and wake-ups per delivery by group, for a phase's lines (idle ones not
 * taken off). A wake-up is the main thread's: nats-server's Go threads are not counted.
 */
const callsLine = (calls, delivered, groups) =>
  calls
    ? `  write system calls / wake-ups per delivery: ${Object.entries(calls.writes)
        .filter(([g, n]) => n > 0 && groups(g))
        .sort((a, b) => b[1] - a[1])
        .map(
          ([g, n]) =>
            `${g} ${(n / delivered).toFixed(2)}${g === "nats-server" ? "" : ` / ${((calls.wakeups[g] ?? 0) / delivered).toFixed(2)}`}`,
        )
        .join(", ")}`
    : null;

/**
 * What each process spends idle (leases, heartbeats, polls, other databases' autovacuum), in µs
 * a second: read in IDLE_WINDOWS windows of IDLE_WINDOW_MS after IDLE_SETTLE_MS of quiet, and
 * the least of each process's readings kept, so a window still busy with what came before (the
 * collector, a sweep, the compiler) does not count as idle and flatter what a phase costs once
 * taken off. Every reading is printed.
 */
const IDLE_SETTLE_MS = 5000;
const IDLE_WINDOWS = 3;
const IDLE_WINDOW_MS = 5000;
async function measureIdle(label) {
  await sleep(IDLE_SETTLE_MS);
  const readings = [];
  for (let i = 0; i < IDLE_WINDOWS; i++) {
    const from = cpuSample();
    await sleep(IDLE_WINDOW_MS);
    const spent = cpuSpent(from, cpuSample());
    if (spent === null) return null;
    // A process that ends while idle is read leaves its group's reading short, and the phases
    // after it would be charged with what it spent.
    const ended = spent.ended.filter((p) => measured(p.group));
    if (ended.length > 0) {
      throw new Error(
        `idle CPU, ${label}: ${ended.map((p) => `${p.group} process ${p.pid} (${p.cmdline})`).join(", ")} ended while it was read`,
      );
    }
    const { cpu } = spent;
    readings.push(Object.fromEntries(Object.entries(cpu).map(([g, us]) => [g, (us * 1000) / IDLE_WINDOW_MS])));
  }
  const groups = [...new Set(readings.flatMap((r) => Object.keys(r)))];
  const idle = Object.fromEntries(groups.map((g) => [g, Math.min(...readings.map((r) => r[g] ?? 0))]));
  console.log(
    `idle CPU, ${label} (ms a second; the least of ${IDLE_WINDOWS} readings of ${IDLE_WINDOW_MS / 1000} s is taken off): ${groups
      .filter((g) => g !== "load generator")
      .map(
        (g) =>
          `${g} ${(idle[g] / 1000).toFixed(1)} (${readings.map((r) => ((r[g] ?? 0) / 1000).toFixed(0)).join("/")})`,
      )
      .join(", ")}`,
  );
  return idle;
}
/** `cpu` (µs per group over `seconds`) less what each group spends idle in that time. */
const withoutIdle = (cpu, seconds, idle) =>
  cpu && idle
    ? Object.fromEntries(Object.entries(cpu).map(([g, us]) => [g, Math.max(0, us - (idle[g] ?? 0) * seconds)]))
    : cpu;
/** The four-process floor's stages summed as "floor" too. */
const withFloorTotal = (cpu) => {
  if (!cpu) return cpu;
  const stages = Object.entries(cpu).filter(([g]) => g.startsWith("floor:"));
  if (stages.length > 0) cpu.floor = stages.reduce((sum, [, us]) => sum + us, 0);
  return cpu;
};
let idle = null;
const SERVICE = ["ingest", "processor", "workers", "receipts", "standalone", "nats-server", "postgres"];

const pct = (sorted, p) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/**
 * The apps' log lines that say a transaction hit a deadlock, and that a delivery (or a receipt,
 * a route) failed and is retried, counted by app as the apps write them: a phase reports how
 * many it caused.
 */
const logCounts = { deadlocks: {}, retries: {} };
const countLine = (source, line) => {
  if (line.includes("deadlock detected")) logCounts.deadlocks[source] = (logCounts.deadlocks[source] ?? 0) + 1;
  if (line.includes("will retry")) logCounts.retries[source] = (logCounts.retries[source] ?? 0) + 1;
};
const logSample = () => ({ deadlocks: { ...logCounts.deadlocks }, retries: { ...logCounts.retries } });
const logsSince = (before) => ({
  deadlocks: countsSince(before.deadlocks, logCounts.deadlocks),
  retries: countsSince(before.retries, logCounts.retries),
});
const countsSince = (before, after) =>
  Object.fromEntries(
    Object.entries(after)
      .map(([k, n]) => [k, n - (before[k] ?? 0)])
      .filter(([, n]) => n > 0),
  );
const sum = (counts) => Object.values(counts).reduce((a, b) => a + b, 0);

/**
 * The users' contacts (email, phone) and a push subscription at the stack's push sandbox, as SQL
 * rows or (BENCH_CONTACTS_VIA_API=1) through the public API as an operator's integration gives
 * them, CONCURRENCY requests at a time.
 */
async function giveContacts(stack, sql) {
  const subscription = await pushSubscription(stack);
  if (!CONTACTS_VIA_API) {
    await sql`insert into user_contacts ${sql(users.map((u) => ({ user_id: u, email: `${u}@example.com`, phone: "+14155550199" })))}
      on conflict (user_id) do nothing`;
    await sql`insert into user_preferences (user_id, device_tokens)
      select u, ${sql.json([subscription])} from unnest(${users}::text[]) u
      on conflict (user_id) do update set device_tokens = excluded.device_tokens`;
    return;
  }
  const put = async (path, body) => {
    const res = await fetch(`${stack.baseUrl}${path}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${stack.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new Error(`PUT ${path}: ${res.status} ${await res.text()}`);
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < users.length) {
        const u = users[next++];
        await put(`/api/v1/users/${u}/contacts`, { email: `${u}@example.com`, phone: "+14155550199" });
        await put(`/api/v1/users/${u}/preferences`, { device_tokens: [subscription] });
      }
    }),
  );
}

/** A browser's push subscription, made at the stack's push sandbox (which keeps its keys). */
async function pushSubscription(stack) {
  const { request } = await import("node:https");
  return new Promise((resolve, reject) => {
    const req = request(
      `${stack.sandboxes.push}/sandbox/subscriptions`,
      { method: "POST", ca: readFileSync(stack.pushCaFile) },
      (res) => {
        let body = "";
        res.on("data", (chunk) => {
          body += chunk;
        });
        res.on("end", () => {
          try {
            const { id: _id, ...subscription } = JSON.parse(body);
            resolve(subscription);
          } catch (error) {
            reject(error);
          }
        });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/**
 * The service on its own database (in the run's state) and namespace: the four apps each in its
 * own process, or (`oneProcess`) all four in one (apps/standalone).
 */
async function startService(oneProcess) {
  const { url: databaseUrl } = await benchDatabase(t);
  const stack = await startStack({
    dataDir: mkdtempSync(join(tmpdir(), "notify-bench-e2e-")),
    databaseUrl,
    natsUrl: TEST_NATS_URL,
    namespace: freshNamespace(t),
    basePort: 0,
    ports: { sandbox: await freePort(), plivoSandbox: await freePort(), pushSandbox: await freePort() },
    seed: true,
    onLine: countLine,
    oneProcess,
    partitions: PARTITIONS,
    nodeOptions: benchNodeOptions(),
    env: {
      // The providers' limits and the per-key limit out of the way: the pipeline is measured.
      PROVIDER_RATE_LIMITS: "sendgrid=100000:10000,plivo=100000:10000",
      RATE_LIMIT_PER_SECOND: "100000",
      RATE_LIMIT_BURST: "100000",
      ...profileEnv(),
    },
  });
  // The bench's own reads, on a pool set up as the service's are.
  const benchDb = createDb({ url: databaseUrl, max: 2, applicationName: "bench" });
  const { sql } = benchDb;
  let stopped;
  const stop = () => (stopped ??= Promise.all([stack.stop(), benchDb.close()]));
  teardowns.push(stop);
  if (servers === null) {
    servers = await serverProcesses(sql, TEST_NATS_URL);
    console.log(
      `CPU of PostgreSQL: ${servers.postmaster === null ? "every postgres process (its server is not on this machine)" : `the server of pid ${servers.postmaster} and its processes`}; of NATS: ${servers.nats === null ? "every nats-server (the one serving the run is not found)" : `the nats-server of pid ${servers.nats}`}`,
    );
    // Not counted (they are not this run's), but their work is on the same servers.
    const strays = processesOf(({ cmdline, ours }) =>
      !ours && /bench\/floor-\S+\.mjs/.test(cmdline) ? "stray" : null,
    );
    if (strays.length > 0) {
      console.warn(
        `warning: floors of another bench run are running, and load PostgreSQL and nats-server: ${strays.map((p) => `${p.pid} (${p.cmdline})`).join(", ")}`,
      );
    }
  }
  await giveContacts(stack, sql);
  return {
    stack,
    sql,
    stop,
    pg: await pgWork(sql),
    groups: oneProcess ? ["standalone"] : ["ingest", "processor", "workers", "receipts"],
  };
}
const users = Array.from({ length: USERS }, (_, i) => `bench-user-${i}`);
let { stack, sql, stop: stopService, pg, groups: appGroups } = await startService(false);
/** Every table's and index's bytes, and the notifications, to size what the bench's own take. */
const storage = async () => {
  const [size] = await sql`/* bench */
    select sum(pg_total_relation_size(c.oid))::bigint as bytes from pg_class c
    join pg_namespace s on s.oid = c.relnamespace where s.nspname = 'public' and c.relkind = 'r'`;
  const [count] = await sql`/* bench */ select count(*)::int as n from notifications`;
  return { bytes: Number(size.bytes), n: count.n };
};
const seeded = await storage();
let counter = 0;

/** One notification; answers its id once accepted. */
const post = (priority, channels) => {
  const n = counter++;
  return postNotification(
    stack.baseUrl,
    stack.apiKey,
    {
      user_id: users[n % users.length],
      category: "account",
      template_id: "welcome",
      data: { name: `#${n}` },
      priority,
      channels,
    },
    { deadlineMs: 60_000 },
  );
};

/**
 * Waits until every notification of the phase (`ids`) is routed and past waiting, and no status
 * moved and no receipt waited for 2 s. The poll itself must cost Postgres next to nothing in
 * either database state, as the floor's does: the waiting channels and the unapplied receipts
 * are counted on their partial indexes (the statuses written out, so the plan can use them), the
 * status history's progress read off its id sequence (the history is partitioned by notification,
 * so its greatest id would be a scan of every row), and the phase's notifications without
 * channel rows looked up by primary key.
 */
async function settled(ids) {
  let moved = "";
  let quietSince = Date.now();
  for (;;) {
    const [c] = await sql`/* bench */
      select (select count(*)::int from notification_channels
                where status in ('pending', 'deferred', 'retrying', 'parked')) as waiting,
             (select last_value::text from channel_status_events_id_seq) as last_event,
             (select count(*)::int from provider_receipts where applied_at is null) as unapplied`;
    const receipts = `${c.last_event}/${c.unapplied}`;
    if (receipts !== moved) {
      moved = receipts;
      quietSince = Date.now();
    }
    // The phase's notifications are looked up only once nothing waits: most polls stop before.
    if (c.waiting === 0 && Date.now() - quietSince > 2000) {
      const [r] = await sql`/* bench */
        select count(*)::int as unrouted from unnest(${ids}::text[]) as i(id)
        where not exists (select 1 from notification_channels c where c.notification_id = i.id)`;
      if (r.unrouted === 0) return;
    }
    await sleep(1000);
  }
}

/** What a phase's notifications became: delivered channels, latencies, the span. */
async function outcome(ids) {
  const rows = await sql`/* bench */
    select extract(epoch from n.created_at) * 1000 as accepted, extract(epoch from e.at) * 1000 as delivered
    from notifications n join channel_status_events e on e.notification_id = n.id and e.status = 'delivered'
    where n.id = any(${ids})`;
  const latencies = rows.map((r) => Number(r.delivered) - Number(r.accepted)).sort((a, b) => a - b);
  const first = Math.min(...rows.map((r) => Number(r.accepted)));
  const last = Math.max(...rows.map((r) => Number(r.delivered)));
  return { delivered: rows.length, latencies, seconds: (last - first) / 1000 };
}

/** A phase of the service; its CPU checked (checkCpu) unless it is `warmUp`. */
async function phase(name, send, { warmUp = false } = {}) {
  const logs = logSample();
  const pgBefore = await pg.read();
  const before = sample();
  const started = Date.now();
  const ids = await send();
  await settled(ids);
  const spent = since(before);
  const pgSpent = await pg.between(pgBefore, await pg.read());
  const cpu = withoutIdle(spent.cpu, (Date.now() - started) / 1000, idle);
  const o = await outcome(ids);
  if (!warmUp) checkCpu(name, spent, cpu, o.delivered, [...appGroups, "nats-server", "postgres"]);
  // The settle wait's idle 2 s are counted too (as they are in production): a small overstatement.
  return {
    name,
    accepted: ids.length,
    wall: (Date.now() - started) / 1000,
    cpu,
    calls: spent.calls,
    logs: logsSince(logs),
    pg: pgSpent,
    ...o,
  };
}

const saturate = (count, priority, channels) => async () => {
  const ids = [];
  let left = count;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) ids.push(await post(priority, channels));
    }),
  );
  return ids;
};
const steady = (rate, seconds, priority, channels) => async () => {
  const pending = [];
  const start = Date.now();
  for (let i = 0; i < rate * seconds; i++) {
    const due = start + (i * 1000) / rate;
    if (due > Date.now()) await sleep(due - Date.now());
    pending.push(post(priority, channels));
  }
  return Promise.all(pending);
};

async function warmUp(label) {
  // Warm-up: connections, compiled templates, JIT; the same 500 emails as each floor's. The
  // statistics stay as autovacuum has them, as on an operator's database.
  idle = null;
  await phase("warm-up", saturate(500, "transactional", ["email"]), { warmUp: true });
  // What every process spends idle is taken off each phase, so a phase shows what its
  // notifications cost.
  idle = await measureIdle(label);
}
await warmUp("the four apps");
const results = [];
const PACED = `${PHASE_CHANNELS.join("+")} at ${RATE}/s`;
const SATURATION = `${PHASE_CHANNELS.join("+")} at saturation`;
const MIXED_PHASE = `${ALL_CHANNELS.join("+")} at saturation`;
results.push(await phase(PACED, steady(RATE, RATE_SECONDS, "transactional", PHASE_CHANNELS)));
results.push(await phase(SATURATION, saturate(EMAILS, "transactional", PHASE_CHANNELS)));
if (CHANNELS === "email") results.push(await phase(MIXED_PHASE, saturate(MIXED, "transactional", ALL_CHANNELS)));
let transactional = [];
results.push(
  await phase("promotional flood + transactional at 10/s", async () => {
    const flood = saturate(FLOOD, "promotional", ["email"]);
    const floodIds = flood();
    const trickle = (async () => {
      const ids = [];
      const start = Date.now();
      for (let i = 0; i < 30 * 10; i++) {
        const due = start + i * 100;
        if (due > Date.now()) await sleep(due - Date.now());
        ids.push(await post("transactional", ["email"]));
      }
      return ids;
    })();
    transactional = await trickle;
    return [...(await floodIds), ...transactional];
  }),
);
const tx = await outcome(transactional);
// What Postgres keeps per notification (rows, indexes, TOAST), for sizing its disk: the bench's
// own notifications, the seeded history taken off.
const stored = await storage();
const kept = { bytes: stored.bytes - seeded.bytes, n: stored.n - seeded.n };

// The same email at the fixed rate and at saturation with the four apps in one process
// (apps/standalone), on a database and namespace of its own.
await stopService();
({ stack, sql, stop: stopService, pg, groups: appGroups } = await startService(true));
await warmUp("the four apps in one process");
const single = [];
single.push(await phase(PACED, steady(RATE, RATE_SECONDS, "transactional", PHASE_CHANNELS)));
single.push(await phase(SATURATION, saturate(EMAILS, "transactional", PHASE_CHANNELS)));
await stopService();

const fmtCounts = (counts) =>
  Object.keys(counts).length === 0
    ? ""
    : ` (${Object.entries(counts)
        .map(([app, n]) => `${app} ${n}`)
        .join(", ")})`;
const line = (r) => {
  const service = r.cpu ? SERVICE.reduce((sum, g) => sum + (r.cpu[g] ?? 0), 0) / r.delivered : Number.NaN;
  return [
    `${r.name}: ${r.accepted} accepted, ${r.delivered} channel deliveries in ${r.seconds.toFixed(1)} s = ${(r.delivered / r.seconds).toFixed(0)} delivered/s`,
    `  202 -> delivered: p50 ${pct(r.latencies, 0.5).toFixed(0)} ms, p99 ${pct(r.latencies, 0.99).toFixed(0)} ms`,
    r.cpu
      ? `  CPU per delivery (µs): ${Object.entries(r.cpu)
          .filter(([, us]) => us > 0)
          .sort((a, b) => b[1] - a[1])
          .map(([g, us]) => `${g} ${(us / r.delivered).toFixed(0)}`)
          .join(", ")}\n  service processes (apps, nats-server, postgres): ${service.toFixed(0)} µs per delivery`
      : "  (no /proc: CPU not measured)",
    callsLine(r.calls, r.delivered, (g) => g !== "load generator"),
    r.logs
      ? `  deadlocks: ${sum(r.logs.deadlocks)}${fmtCounts(r.logs.deadlocks)}; "will retry" lines: ${sum(r.logs.retries)}${fmtCounts(r.logs.retries)}`
      : null,
    ...pgWorkLines(r.pg, r.delivered),
  ]
    .filter((l) => l !== null)
    .join("\n");
};
console.log(
  `\ndatabase: ${DB_STATE}; the service as shipped (LOG_LEVEL info), except what the bench lifts: the providers' rate limits (PROVIDER_RATE_LIMITS) and the per-key rate limit (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST)`,
);
console.log(
  `users ${USERS} (contacts ${CONTACTS_VIA_API ? "through the API" : "seeded in SQL"}), ${CONCURRENCY} concurrent senders, channels ${PHASE_CHANNELS.join("+")}`,
);
for (const r of results) console.log(line(r));
const serviceUs = (cpu) => (cpu ? SERVICE.reduce((sum, g) => sum + (cpu[g] ?? 0), 0) : Number.NaN);
// The mixed phase per notification, beside email only at saturation: what a notification with
// every channel costs against one with email alone.
const mixed = results.find((r) => r.name === MIXED_PHASE);
const emailOnly = results.find((r) => r.name === "email at saturation");
if (mixed && emailOnly)
  console.log(
    `per notification: ${ALL_CHANNELS.join("+")} ${(serviceUs(mixed.cpu) / mixed.accepted).toFixed(0)} µs CPU (${(mixed.delivered / mixed.accepted).toFixed(2)} channel deliveries each, ${(mixed.accepted / mixed.seconds).toFixed(0)} notifications/s), email only ${(serviceUs(emailOnly.cpu) / emailOnly.accepted).toFixed(0)} µs CPU (${(emailOnly.accepted / emailOnly.seconds).toFixed(0)} notifications/s)`,
  );
console.log(
  `transactional while the promotional flood ran: p50 ${pct(tx.latencies, 0.5).toFixed(0)} ms, p99 ${pct(tx.latencies, 0.99).toFixed(0)} ms (${tx.delivered} delivered)`,
);
console.log(
  `Postgres: ${(kept.bytes / kept.n / 1024).toFixed(1)} KiB per notification (${kept.n} notifications, every table and index)`,
);
for (const r of single) console.log(line({ ...r, name: `the four apps in one process (apps/standalone), ${r.name}` }));
const deadlocks = [...results, ...single].reduce((n, r) => n + sum(r.logs.deadlocks), 0);
console.log(`deadlocks in all phases: ${deadlocks} (target 0)`);
if (CHANNELS === "mixed") {
  // The floors send email only: there is nothing to compare a mixed run with.
  console.log("BENCH_CHANNELS=mixed: the email-only floors are not run");
  await tearDown();
  process.exit(0);
}

// The floor: the same email saturation on bench/floor-pipeline.mjs, with its own database,
// namespace and SendGrid sandbox (posting its signed events to the floor). First in one process,
// then its four stages in four processes, each with its own connections, as the apps run.
const webhookKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
/** A child (bench/lib.mjs forkChild), once it has sent its first message: ready. */
const forkReady = (module, args, options) =>
  new Promise((resolve, reject) => {
    const child = forkChild(module, args, options);
    child.once("message", () => resolve(child));
    child.once("exit", (code, signal) => reject(new Error(`${module} ${args.join(" ")} exited (${signal ?? code})`)));
  });
const forkFloor = (env) =>
  // The stages are an argument too, so that ps and the CPU sums tell the processes apart.
  forkReady(new URL("./floor-pipeline.mjs", import.meta.url), [env.FLOOR_STAGES], {
    execArgv: floorExecArgv(),
    env: { ...process.env, ...profileEnv(), ...env },
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
const FLOOR_KEY = "floor-bench-key";
/**
 * One floor (its database, namespace, sandbox, processes): the stages of each process in
 * `split`; with `checks`, each stage also does what it must besides the durable work.
 */
async function startFloor(split, checks) {
  const db = await benchDatabase(t);
  const namespace = freshNamespace(t);
  const port = await freePort();
  const receiptPort = split.length > 1 ? await freePort() : port;
  const sandboxPort = await freePort();
  // The sandbox answers { ready } on its IPC channel once it listens, and stops when the channel closes.
  const sandbox = await forkReady(new URL("../libs/devstack/dist/sandbox-cli.js", import.meta.url), [], {
    execArgv: [],
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: String(sandboxPort),
      SANDBOX_API_KEY: "SG.floor",
      SANDBOX_EVENT_WEBHOOK_URL: `http://127.0.0.1:${receiptPort}/webhooks/sendgrid`,
      SANDBOX_WEBHOOK_PRIVATE_KEY: webhookKeys.privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    },
    stdio: ["ignore", "ignore", "ignore", "ipc"],
  });
  const children = await Promise.all(
    split.map((stages) =>
      forkFloor({
        FLOOR_STAGES: stages,
        FLOOR_CHECKS: checks ? "1" : "0",
        FLOOR_API_KEY: FLOOR_KEY,
        PORT: String(stages.includes("receipt") ? receiptPort : port),
        DATABASE_URL: db.url,
        NATS_URL: TEST_NATS_URL,
        NATS_NAMESPACE: namespace,
        SENDGRID_API_KEY: "SG.floor",
        SENDGRID_BASE_URL: `http://127.0.0.1:${sandboxPort}`,
        SENDGRID_WEBHOOK_PUBLIC_KEY: webhookKeys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
      }),
    ),
  );
  const floorDb = createDb({ url: db.url, max: 2, applicationName: "bench" });
  const floorSql = floorDb.sql;
  // The users' contacts, as the service has them (the floor with the checks reads them).
  await floorSql`insert into user_contacts ${floorSql(users.map((u) => ({ user_id: u, email: `${u}@example.com`, phone: "+14155550199" })))}
    on conflict (user_id) do nothing`;
  const processes = [...children, sandbox];
  let stopped;
  // Waits for every process (and so for its database sessions) to end: a process that ends
  // during the next run would take its CPU time out of that run's sums.
  const stop = () =>
    (stopped ??= (async () => {
      await floorDb.close();
      await Promise.all(processes.map((child) => stopChild(child)));
      await sleep(1000);
    })());
  teardowns.push(stop);
  // The groups its CPU is summed from (groupOf's names for its processes).
  const groups = split.length > 1 ? split.map((stages) => `floor:${stages}`) : ["floor"];
  return { port, sql: floorSql, stop, checks, children, groups };
}
/**
 * Until every floor email of the phase is delivered and both of its events are stored. The
 * poll costs Postgres as little in a database with history as in a fresh one, as the service's
 * does (settled): the waiting channels are counted on their partial index, and the phase's
 * receipts (by its channels' provider ids, in the log's default partition, where receipts
 * that name no notification go) only once none waits.
 */
async function floorSettled(floor, ids) {
  const floorSql = floor.sql;
  for (;;) {
    const gone = floor.children.find((child) => child.exitCode !== null || child.signalCode !== null);
    if (gone)
      throw new Error(`a floor process (${gone.spawnargs.slice(-1)[0]}) exited (${gone.signalCode ?? gone.exitCode})`);
    const [c] = await floorSql`
      select count(*)::int as waiting from notification_channels
      where status in ('pending', 'deferred', 'retrying', 'parked')`;
    if (c.waiting === 0) {
      const [r] = await floorSql`
        select count(*)::int as receipts from notification_channels c
        join provider_receipts r on r.provider = 'sendgrid' and r.provider_id = c.provider_id
          and r.notification_id is null
        where c.notification_id = any(${ids}::text[]) and c.channel = 'email' and c.status = 'delivered'`;
      if (r.receipts >= 2 * ids.length) return;
    }
    await sleep(500);
  }
}
/**
 * Posts `count` notifications to a floor, as fast as CONCURRENCY allows or at `rate` a second;
 * its CPU checked (checkCpu) unless `label` is null (the warm-up).
 */
const floorPhase = async (floor, count, rate, label) => {
  const ids = [];
  const before = sample();
  const started = Date.now();
  // Every floor gets what the service gets, and stores the same row.
  const postOne = (n) =>
    postNotification(`http://127.0.0.1:${floor.port}`, floor.checks ? FLOOR_KEY : "none", {
      user_id: users[n % users.length],
      category: "account",
      template_id: "welcome",
      data: { name: `#${n}` },
      priority: "transactional",
      channels: ["email"],
    });
  if (rate === undefined) {
    let left = count;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) ids.push(await postOne(left));
      }),
    );
  } else {
    const pending = [];
    for (let i = 0; i < count; i++) {
      const due = started + (i * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      pending.push(postOne(i));
    }
    ids.push(...(await Promise.all(pending)));
  }
  await floorSettled(floor, ids);
  const seconds = (Date.now() - started) / 1000;
  const spent = since(before);
  const cpu = withFloorTotal(withoutIdle(spent.cpu, seconds, floor.idle));
  if (label) checkCpu(label, spent, cpu, count, [...floor.groups, "nats-server", "postgres"]);
  const calls = spent.calls && {
    writes: withFloorTotal(spent.calls.writes),
    wakeups: withFloorTotal(spent.calls.wakeups),
  };
  return { cpu, calls, seconds, delivered: count };
};
/**
 * A floor's runs after the same warm-up as the service's (500 emails), on a database in the same
 * state: email at the fixed rate, then at saturation, as the service's phases run. Its processes'
 * idle CPU is taken off, as the apps' is.
 */
async function runFloor(label, split, checks = false) {
  const floor = await startFloor(split, checks);
  floor.idle = null;
  await floorPhase(floor, 500);
  floor.idle = await measureIdle(label);
  const paced = await floorPhase(floor, RATE * RATE_SECONDS, RATE, `${label}, email at ${RATE}/s`);
  const run = await floorPhase(floor, EMAILS, undefined, `${label}, email at saturation`);
  await floor.stop();
  return { ...run, paced };
}
const floorRun = await runFloor("the floor", ["accept,route,deliver,receipt"]);
const splitRun = await runFloor("the floor in four processes", ["accept", "route", "deliver", "receipt"]);
const checkedRun = await runFloor("the floor with the checks", ["accept,route,deliver,receipt"], true);
const checkedSplitRun = await runFloor(
  "the floor with the checks in four processes",
  ["accept", "route", "deliver", "receipt"],
  true,
);
const saturation = results.find((r) => r.name === SATURATION);
const FLOOR_SERVICE = ["floor", "nats-server", "postgres"];
const floorCpuUs = (run) =>
  run.cpu ? FLOOR_SERVICE.reduce((sum, g) => sum + (run.cpu[g] ?? 0), 0) / run.delivered : Number.NaN;
const floorUs = floorCpuUs(floorRun);
const splitUs = floorCpuUs(splitRun);
const checkedUs = floorCpuUs(checkedRun);
const checkedSplitUs = floorCpuUs(checkedSplitRun);
const notifyUs = serviceUs(saturation.cpu) / saturation.delivered;
const singleSaturation = single.find((r) => r.name === SATURATION);
const singleUs = serviceUs(singleSaturation.cpu) / singleSaturation.delivered;
const singlePaced = single.find((r) => r.name === PACED);
const singlePacedUs = serviceUs(singlePaced.cpu) / singlePaced.delivered;
const paced = results.find((r) => r.name === PACED);
const pacedUs = serviceUs(paced.cpu) / paced.delivered;
const floorCpuLine = (run) =>
  Object.entries(run.cpu)
    .filter(([g, cpu]) => cpu > 0 && ["floor", "nats-server", "postgres", "sandboxes", "load generator"].includes(g))
    .sort((a, b) => b[1] - a[1])
    .map(([g, cpu]) => `${g} ${(cpu / run.delivered).toFixed(0)}`)
    .join(", ");
const floorLines = (title, run) => {
  for (const [phase, r] of [
    [`email at ${RATE}/s`, run.paced],
    ["email at saturation", run],
  ]) {
    console.log(
      `${title}, ${phase}: ${r.delivered} delivered in ${r.seconds.toFixed(1)} s = ${(r.delivered / r.seconds).toFixed(0)} delivered/s`,
    );
    if (r.cpu)
      console.log(
        `  CPU per delivery (µs): ${floorCpuLine(r)}\n  service processes (floor, nats-server, postgres): ${floorCpuUs(r).toFixed(0)} µs per delivery`,
      );
    const calls = callsLine(r.calls, r.delivered, (g) => g !== "load generator" && !g.startsWith("floor:"));
    if (calls) console.log(calls);
  }
};
floorLines("floor (bench/floor-pipeline.mjs)", floorRun);
floorLines("floor in four processes (accept, route, deliver, receipt)", splitRun);
floorLines("floor with each stage's checks, one process", checkedRun);
floorLines("floor with each stage's checks in four processes", checkedSplitRun);
// Each app against the stage of the four-process floors that does its durable work, bare and
// with the stage's checks: which app the gap between the service and the floor sits in, and
// how much of it is the work every stage must also do (the bare route stage reads no profile
// and renders nothing).
const STAGE_OF_APP = { ingest: "accept", processor: "route", workers: "deliver", receipts: "receipt" };
for (const [phase, service, floor, which] of [
  [`email at ${RATE}/s`, paced, splitRun.paced, "four-process floor"],
  ["email at saturation", saturation, splitRun, "four-process floor"],
  [`email at ${RATE}/s`, paced, checkedSplitRun.paced, "four-process floor with the checks"],
  ["email at saturation", saturation, checkedSplitRun, "four-process floor with the checks"],
]) {
  if (!service.cpu || !floor.cpu) continue;
  const stages = Object.entries(STAGE_OF_APP).map(([app, stage]) => {
    const appUs = (service.cpu[app] ?? 0) / service.delivered;
    const floorStageUs = (floor.cpu[`floor:${stage}`] ?? 0) / floor.delivered;
    const per = (calls, kind, group, delivered) => ((calls[kind][group] ?? 0) / delivered).toFixed(2);
    const calls =
      service.calls && floor.calls
        ? `; writes ${per(service.calls, "writes", app, service.delivered)} / ${per(floor.calls, "writes", `floor:${stage}`, floor.delivered)}, wake-ups ${per(service.calls, "wakeups", app, service.delivered)} / ${per(floor.calls, "wakeups", `floor:${stage}`, floor.delivered)}`
        : "";
    return `${app} ${appUs.toFixed(0)} / ${stage} ${floorStageUs.toFixed(0)} (${(floorStageUs / appUs).toFixed(2)}${calls})`;
  });
  console.log(
    `each app against its stage of the ${which}, ${phase} (µs of CPU per email, app / floor stage, ratio; write system calls and wake-ups per email, app / floor stage): ${stages.join(", ")}`,
  );
}
console.log(
  `\nJSON ${JSON.stringify(results.map(({ latencies, ...r }) => ({ ...r, p50: pct(latencies, 0.5), p99: pct(latencies, 0.99) })))}`,
);

console.log(
  `\nratio (floor / notify service CPU per delivered email): ${(floorUs / notifyUs).toFixed(2)} (${floorUs.toFixed(0)} / ${notifyUs.toFixed(0)} µs)`,
);
console.log(
  `ratio (four-process floor / notify service CPU per delivered email): ${(splitUs / notifyUs).toFixed(2)} (${splitUs.toFixed(0)} / ${notifyUs.toFixed(0)} µs)`,
);
console.log(
  `ratio at ${RATE}/s (floor / notify, four-process floor / notify): ${(floorCpuUs(floorRun.paced) / pacedUs).toFixed(2)}, ${(floorCpuUs(splitRun.paced) / pacedUs).toFixed(2)} (${floorCpuUs(floorRun.paced).toFixed(0)}, ${floorCpuUs(splitRun.paced).toFixed(0)} / ${pacedUs.toFixed(0)} µs)`,
);
console.log(
  `ratio (floor / notify in one process, both one process): ${(floorUs / singleUs).toFixed(2)} (${floorUs.toFixed(0)} / ${singleUs.toFixed(0)} µs); at ${RATE}/s ${(floorCpuUs(floorRun.paced) / singlePacedUs).toFixed(2)} (${floorCpuUs(floorRun.paced).toFixed(0)} / ${singlePacedUs.toFixed(0)} µs)`,
);
console.log(
  `ratio (floor with the checks / notify, four processes and one): ${(checkedUs / notifyUs).toFixed(2)}, ${(checkedUs / singleUs).toFixed(2)} (${checkedUs.toFixed(0)} / ${notifyUs.toFixed(0)}, ${singleUs.toFixed(0)} µs)`,
);
console.log(
  `ratio (four-process floor with the checks / notify, four processes): ${(checkedSplitUs / notifyUs).toFixed(2)} (${checkedSplitUs.toFixed(0)} / ${notifyUs.toFixed(0)} µs)`,
);
console.log(
  `ratio (notify / floor delivered/s): ${(saturation.delivered / saturation.seconds / (EMAILS / floorRun.seconds)).toFixed(2)}`,
);

summarize({
  what: "whole pipeline, one email to receipt",
  notify: { cpuUs: notifyUs, rate: saturation.delivered / saturation.seconds },
  floor: { cpuUs: floorUs, rate: EMAILS / floorRun.seconds },
  extra: { "floor with the checks": { cpuUs: checkedUs, rate: EMAILS / checkedRun.seconds } },
  ratio: floorUs / notifyUs,
  command: "npm run bench:e2e",
});
summarize({
  what: "whole pipeline, against the same floor run as four processes",
  notify: { cpuUs: notifyUs, rate: saturation.delivered / saturation.seconds },
  floor: { cpuUs: splitUs, rate: EMAILS / splitRun.seconds },
  extra: { "floor with the checks": { cpuUs: checkedSplitUs, rate: EMAILS / checkedSplitRun.seconds } },
  ratio: splitUs / notifyUs,
  command: "npm run bench:e2e",
});
summarize({
  what: `whole pipeline at ${RATE}/s, against the four-process floor`,
  notify: { cpuUs: pacedUs, rate: paced.delivered / paced.seconds },
  floor: { cpuUs: floorCpuUs(splitRun.paced), rate: splitRun.paced.delivered / splitRun.paced.seconds },
  ratio: floorCpuUs(splitRun.paced) / pacedUs,
  command: "npm run bench:e2e",
});
// The same two against the four-process floor that also makes each stage's checks (keys,
// validation, preferences, templates, the shared rate bucket): what a program doing only the
// work every stage must do reaches, beside the bare floor the targets are set against.
summarize({
  what: "whole pipeline, against the four-process floor with the checks",
  notify: { cpuUs: notifyUs, rate: saturation.delivered / saturation.seconds },
  floor: { cpuUs: checkedSplitUs, rate: EMAILS / checkedSplitRun.seconds },
  ratio: checkedSplitUs / notifyUs,
  command: "npm run bench:e2e",
});
summarize({
  what: `whole pipeline at ${RATE}/s, against the four-process floor with the checks`,
  notify: { cpuUs: pacedUs, rate: paced.delivered / paced.seconds },
  floor: {
    cpuUs: floorCpuUs(checkedSplitRun.paced),
    rate: checkedSplitRun.paced.delivered / checkedSplitRun.paced.seconds,
  },
  ratio: floorCpuUs(checkedSplitRun.paced) / pacedUs,
  command: "npm run bench:e2e",
});
// Each app against its own stage of the four-process floor (the target: at least 0.8 each).
for (const [phase, service, floor] of [
  ["", saturation, splitRun],
  [` at ${RATE}/s`, paced, splitRun.paced],
]) {
  if (!service.cpu || !floor.cpu) continue;
  for (const [app, stage] of Object.entries(STAGE_OF_APP)) {
    const appUs = (service.cpu[app] ?? 0) / service.delivered;
    const stageUs = (floor.cpu[`floor:${stage}`] ?? 0) / floor.delivered;
    summarize({
      what: `${app}${phase}, against the ${stage} stage of the four-process floor`,
      notify: { cpuUs: appUs },
      floor: { cpuUs: stageUs },
      ratio: stageUs / appUs,
      command: "npm run bench:e2e",
    });
  }
}
summarize({
  what: "whole pipeline, the four apps in one process (apps/standalone)",
  notify: { cpuUs: singleUs, rate: singleSaturation.delivered / singleSaturation.seconds },
  floor: { cpuUs: floorUs, rate: EMAILS / floorRun.seconds },
  extra: { "floor with the checks": { cpuUs: checkedUs, rate: EMAILS / checkedRun.seconds } },
  ratio: floorUs / singleUs,
  command: "npm run bench:e2e",
});
// PostgreSQL's own CPU per email against the four-process floor's, at saturation and at the rate.
const pgUs = (run) => (run.cpu ? (run.cpu.postgres ?? 0) / run.delivered : Number.NaN);
summarize({
  what: "PostgreSQL's CPU per email, against the four-process floor's",
  notify: { cpuUs: pgUs(saturation) },
  floor: { cpuUs: pgUs(splitRun) },
  ratio: pgUs(splitRun) / pgUs(saturation),
  command: "npm run bench:e2e",
});
summarize({
  what: `PostgreSQL's CPU per email at ${RATE}/s, against the four-process floor's`,
  notify: { cpuUs: pgUs(paced) },
  floor: { cpuUs: pgUs(splitRun.paced) },
  ratio: pgUs(splitRun.paced) / pgUs(paced),
  command: "npm run bench:e2e",
});
// All four channels per notification, beside email only (no floor sends them).
if (mixed)
  summarize({
    what: `${ALL_CHANNELS.join("+")} per notification, against email only`,
    notify: { cpuUs: serviceUs(mixed.cpu) / mixed.accepted, rate: mixed.accepted / mixed.seconds },
    floor: { cpuUs: serviceUs(saturation.cpu) / saturation.accepted, rate: saturation.accepted / saturation.seconds },
    ratio: serviceUs(saturation.cpu) / saturation.accepted / (serviceUs(mixed.cpu) / mixed.accepted),
    command: "npm run bench:e2e",
  });

await tearDown();
process.exit(0);
