import { execSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { appendFileSync, existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { MIGRATIONS_FOLDER } from "@notify/db";
import { APP_NODE_OPTIONS } from "@notify/devstack";
import { freshDatabase, TEST_PG_URL } from "@notify/testing";
import autocannon from "autocannon";
import postgres from "postgres";
import { forkChild } from "./children.mjs";

// Every process a bench starts goes through bench/children.mjs, which stops them however the
// bench ends.
export { forkChild, onAbort, runningChildren, spawnChild, stopChild, stopChildren } from "./children.mjs";

/** Runs autocannon and returns req/s and latency percentiles (ms). */
export async function load({ url, body, headers, connections, seconds, uniqueKeys }) {
  const result = await autocannon({
    url,
    method: "POST",
    connections,
    duration: seconds,
    headers: { "content-type": "application/json", ...headers },
    body,
    // A fresh Idempotency-Key per request, so every request is a new notification.
    requests: uniqueKeys
      ? [{ setupRequest: (req) => ({ ...req, headers: { ...req.headers, "idempotency-key": randomUUID() } }) }]
      : undefined,
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    total: result.requests.total,
  };
}

/**
 * Node.js options every app and floor a bench starts gets besides the apps' own, from
 * BENCH_NODE_OPTIONS (separated by spaces): a profiler's flags, which NODE_OPTIONS refuses
 * (`--perf-basic-prof-only-functions` for `perf`, `--trace-opt`, `--trace-gc`). See
 * docs/benchmarks.md#profiles.
 */
export const benchNodeOptions = () => (process.env.BENCH_NODE_OPTIONS ?? "").split(/\s+/).filter(Boolean);

/** The exec arguments of a floor a bench forks: the apps' Node.js options and the bench's. */
export const floorExecArgv = () => [...APP_NODE_OPTIONS, ...benchNodeOptions()];

export function startHello(port) {
  return startServer("./hello.mjs", { PORT: String(port) });
}

/** The minimal durable ingest (bench/floor-server.mjs) on the given database and namespace. */
export function startFloor(port, env) {
  return startServer("./floor-server.mjs", { PORT: String(port), ...env });
}

function startServer(script, env) {
  return new Promise((resolve, reject) => {
    const child = forkChild(new URL(script, import.meta.url), [], {
      // The apps' runtime options: a floor runs as the app it is compared with.
      execArgv: floorExecArgv(),
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    child.once("message", () => resolve(child));
    child.once("exit", (code) => reject(new Error(`${script} exited ${code}`)));
  });
}

/**
 * The environment that makes a spawned app (or floor) record its V8 CPU profile into
 * $BENCH_CPU_PROF_DIR (bench/cpu-profile.mjs), or nothing when that variable is unset.
 */
export const profileEnv = () =>
  process.env.BENCH_CPU_PROF_DIR
    ? {
        NODE_OPTIONS: `--import=${new URL("./cpu-profile.mjs", import.meta.url).href}`,
        CPU_PROFILE_DIR: process.env.BENCH_CPU_PROF_DIR,
        ALLOC_PROFILE: process.env.BENCH_ALLOC_PROF === "1" ? "1" : "0",
      }
    : {};

/**
 * One row of the table of docs/benchmarks.md (bench/table.mjs), appended as a JSON line to
 * $BENCH_SUMMARY when it is set: what was measured, the command that reproduces it, notify's
 * figures and its floor's measured in the same run (`{ cpuUs, rate }`: µs of CPU and units of
 * work a second), the ratio (floor / notify in CPU per unit of work), and any other reference of
 * the same run in `extra` (by name, `{ cpuUs?, rate? }`). The database state is added here.
 * bench/table.mjs takes the medians over its runs.
 */
export function summarize(row) {
  if (process.env.BENCH_SUMMARY)
    appendFileSync(process.env.BENCH_SUMMARY, `${JSON.stringify({ ...row, state: dbState() })}\n`);
}

/** A figure as that table prints it: µs below a millisecond, ms above, thousands spaced. */
export const cpuFigure = (us) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms CPU` : `${us.toFixed(0)} µs CPU`);
export const rateFigure = (perSecond) => `${Math.round(perSecond).toLocaleString("en").replaceAll(",", " ")}/s`;

export const fmt = (r) =>
  `${r.rps.toFixed(0).padStart(7)} req/s   p50 ${String(r.p50).padStart(4)} ms   p99 ${String(r.p99).padStart(4)} ms   (${r.total} requests, ${r.non2xx} non-2xx, ${r.errors} errors)`;

const TICKS = (() => {
  try {
    return Number(execSync("getconf CLK_TCK").toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * Every process under /proc, read once: its pid, its parent's, comm, command line (arguments
 * joined by spaces) and the fields of its stat after the command. A process that ends meanwhile
 * is left out.
 */
function readProcesses() {
  const all = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").replaceAll("\0", " ");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      all.push({ pid: Number(name), ppid: Number(fields[1]), comm, cmdline, fields });
    } catch {}
  }
  return all;
}

/**
 * Each process under /proc that `groupOf` names a group for: its key (pid and start time, so
 * that a pid used again is another process), pid, parent's pid, group, comm, command line, the
 * fields of its stat after the command, and the text of each of `files` (under /proc/<pid>/).
 * `groupOf` gets the pid, the parent's pid, comm, the command line and `ours`: whether the
 * process descends from this one (an app, a floor or a sandbox this bench started, not one of
 * another bench or one an earlier run left running). A process that ends meanwhile is skipped.
 */
function* groupedProcesses(groupOf, files = []) {
  const all = readProcesses();
  const parentOf = new Map(all.map((p) => [p.pid, p.ppid]));
  const ours = (pid) => {
    for (let p = parentOf.get(pid), hops = 0; p !== undefined && hops < 100; p = parentOf.get(p), hops++) {
      if (p === process.pid) return true;
    }
    return false;
  };
  for (const p of all) {
    const group = groupOf({ pid: p.pid, ppid: p.ppid, comm: p.comm, cmdline: p.cmdline, ours: ours(p.pid) });
    if (!group) continue;
    let texts;
    try {
      texts = files.map((file) => readFileSync(`/proc/${p.pid}/${file}`, "utf8"));
    } catch {
      continue;
    }
    yield { ...p, key: `${p.pid}:${p.fields[19]}`, group, texts };
  }
}

/** The processes `groupOf` names a group for (as groupedProcesses asks it): `{ pid, group, cmdline }` each. */
export const processesOf = (groupOf) =>
  existsSync("/proc/self/stat")
    ? [...groupedProcesses(groupOf)].map(({ pid, group, cmdline }) => ({ pid, group, cmdline: cmdline.trim() }))
    : [];

/** `after` less `before`, group by group (a group missing from one counts 0 there). */
const countsBetween = (before, after) =>
  Object.fromEntries(
    [...new Set([...Object.keys(before), ...Object.keys(after)])].map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]),
  );

/** Every group of two readings, at 0. */
const zeros = (before, after) => Object.fromEntries([...Object.keys(before), ...Object.keys(after)].map((k) => [k, 0]));

/**
 * Where a reading keeps its processes one by one: an enumerable symbol, which a spread
 * (`{ server: 0, ...reading }`) copies and Object.entries and JSON leave out, so a reading still
 * reads as its sums by group.
 */
const PROCESSES = Symbol("processes");

/**
 * CPU ticks so far (user + system, from /proc) of every process `groupOf` names a group for,
 * summed by group (and kept process by process, for cpuSpent); null where /proc is missing (not
 * Linux).
 */
export function cpuTicks(groupOf) {
  if (!existsSync("/proc/self/stat")) return null;
  const groups = {};
  const processes = new Map();
  for (const { key, pid, ppid, group, comm, cmdline, fields } of groupedProcesses(groupOf)) {
    // PostgreSQL runs a process per connection and autovacuum workers that come and go: one
    // ending between two readings would take its time with it. The postmaster reaps them, and
    // its reaped children's time (cutime, cstime) keeps it.
    const reaps = comm === "postgres";
    const ticks = Number(fields[11]) + Number(fields[12]) + (reaps ? Number(fields[13]) + Number(fields[14]) : 0);
    groups[group] = (groups[group] ?? 0) + ticks;
    processes.set(key, {
      pid,
      ppid,
      group,
      comm,
      cmdline: cmdline.replace(/\s+/g, " ").trim().slice(0, 200),
      ticks,
      reaps,
    });
  }
  groups[PROCESSES] = processes;
  return groups;
}

/**
 * What the processes of two cpuTicks() readings spent in between, process by process:
 * `{ cpu, seen, ended }`, or null if either reading is. `cpu` is µs by group: each process's
 * ticks less its own in the first reading (all of them for one that started in between). A
 * process of the first reading gone from the second was reaped by a process counted with its
 * children's time (PostgreSQL's postmaster: its time moved there, and its first reading comes
 * off there), or it `ended` uncounted: its time after the first reading is unknown, so its
 * group's figure is short of it, and the caller must not trust it. `seen` counts, by group, the
 * processes in both readings: a group with none was not measured at all. (Readings whose
 * processes were not kept, such as a copy made with Object.entries, are taken by their sums
 * alone: `seen` is null, and a process that ended takes its whole time off its group.)
 */
export function cpuSpent(before, after) {
  if (!before || !after) return null;
  const was = before[PROCESSES];
  const is = after[PROCESSES];
  const toUs = (ticks) => Object.fromEntries(Object.entries(ticks).map(([g, n]) => [g, (n * 1e6) / TICKS]));
  if (!was || !is) return { cpu: toUs(countsBetween(before, after)), seen: null, ended: [] };
  const ticks = zeros(before, after);
  const seen = {};
  for (const [key, p] of is) {
    const then = was.get(key);
    ticks[p.group] += p.ticks - (then?.ticks ?? 0);
    if (then) seen[p.group] = (seen[p.group] ?? 0) + 1;
  }
  const reapers = new Map([...is.values()].filter((p) => p.reaps).map((p) => [p.pid, p.group]));
  const ended = [];
  for (const [key, p] of was) {
    if (is.has(key)) continue;
    const reaper = reapers.get(p.ppid);
    if (reaper !== undefined) ticks[reaper] -= p.ticks;
    else ended.push({ pid: p.pid, group: p.group, comm: p.comm, cmdline: p.cmdline });
  }
  return { cpu: toUs(ticks), seen, ended };
}

/** Microseconds of CPU per group between two cpuTicks() readings (null if either is): cpuSpent's `cpu`. */
export const cpuBetween = (before, after) => cpuSpent(before, after)?.cpu ?? null;

/**
 * Why the CPU of a run cannot be right, as sentences (none when it can be trusted): one of
 * `groups` (the processes whose CPU a figure sums) had no process in both readings (none was
 * found, or the one read is not the one that did the work); one of their processes ended in
 * between (its time after the first reading is lost); one spent nothing (once its idle was taken
 * off: the idle reading swallowed the run); or all of them together spent under `leastUs` per
 * unit of work (`delivered` units). `spent` is cpuSpent's answer, `cpu` the figures derived
 * from it (its `cpu` less idle, say). Nothing is wrong with a run not measured (no /proc).
 */
export function cpuProblems({ spent, cpu = spent?.cpu ?? null, delivered, groups, leastUs }) {
  if (!spent || !cpu) return [];
  const problems = spent.ended
    .filter((p) => groups.includes(p.group))
    .map((p) => `${p.group} process ${p.pid} (${p.cmdline}) ended during the run`);
  for (const g of groups) {
    if (spent.seen && !spent.seen[g]) problems.push(`no ${g} process ran throughout the run`);
    else if (!((cpu[g] ?? 0) > 0)) {
      problems.push(
        `${g} spent ${((cpu[g] ?? 0) / 1000).toFixed(1)} ms (${((spent.cpu[g] ?? 0) / 1000).toFixed(1)} ms as read, before any idle was taken off)`,
      );
    }
  }
  const perUnit = groups.reduce((n, g) => n + (cpu[g] ?? 0), 0) / delivered;
  if (!(perUnit >= leastUs)) {
    problems.push(
      `${groups.join(", ")} spent ${perUnit.toFixed(1)} µs per delivery together (${delivered} deliveries), under the least believable ${leastUs} µs`,
    );
  }
  return problems;
}

/**
 * Write system calls so far (from /proc/<pid>/io) of every process `groupOf` names a group for,
 * and the times its main thread was woken (its voluntary context switches), summed by group
 * (and kept process by process): `{ writes, wakeups }`, each by group; null where /proc is
 * missing. On loopback a write also runs the receiver's side of TCP, so writes are much of what
 * a message costs between processes, and a wake-up costs a Node.js process 0.1-0.2 ms on a small
 * virtual machine. (A process whose io this process may not read, another user's, is left out.)
 */
export function syscallCounts(groupOf) {
  if (!existsSync("/proc/self/io")) return null;
  const writes = {};
  const wakeups = {};
  const processes = new Map();
  for (const { key, group, texts } of groupedProcesses(groupOf, ["io", "status"])) {
    const [io, status] = texts;
    const w = Number(/^syscw: (\d+)/m.exec(io)?.[1] ?? 0);
    const k = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    writes[group] = (writes[group] ?? 0) + w;
    wakeups[group] = (wakeups[group] ?? 0) + k;
    processes.set(key, { group, writes: w, wakeups: k });
  }
  return { writes, wakeups, [PROCESSES]: processes };
}

/**
 * Per group between two syscallCounts() samples: `{ writes, wakeups }` (null if either is),
 * process by process as cpuSpent takes them; a process that ended in between counts nothing.
 */
export function syscallsBetween(before, after) {
  if (!before || !after) return null;
  const was = before[PROCESSES];
  const is = after[PROCESSES];
  if (!was || !is) {
    return {
      writes: countsBetween(before.writes, after.writes),
      wakeups: countsBetween(before.wakeups, after.wakeups),
    };
  }
  const writes = zeros(before.writes, after.writes);
  const wakeups = zeros(before.wakeups, after.wakeups);
  for (const [key, p] of is) {
    const then = was.get(key);
    writes[p.group] += p.writes - (then?.writes ?? 0);
    wakeups[p.group] += p.wakeups - (then?.wakeups ?? 0);
  }
  return { writes, wakeups };
}

/** The pid of the process listening on TCP `port` on this machine (whose comm is `comm`, if given), or null. */
export function listenerPid(port, comm) {
  const inodes = new Set();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const [, local, , state, , , , , , inode] = line.trim().split(/\s+/);
      if (state === "0A" && Number.parseInt(local.split(":")[1], 16) === port) inodes.add(inode);
    }
  }
  if (inodes.size === 0) return null;
  for (const p of readProcesses()) {
    if (comm !== undefined && p.comm !== comm) continue;
    let fds;
    try {
      fds = readdirSync(`/proc/${p.pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${p.pid}/fd/${fd}`));
        if (socket && inodes.has(socket[1])) return p.pid;
      } catch {}
    }
  }
  return null;
}

/**
 * The PostgreSQL and NATS servers a bench uses, as processes of this machine: `postmaster`, the
 * pid of the PostgreSQL server `sql` is connected to (its backend's parent), and `nats`, that of
 * the nats-server listening on `natsUrl`'s port; each null when not found here. `groupOf` names
 * "postgres" for that postmaster and its children (backends, autovacuum, background workers) and
 * "nats-server" for that nats-server, and nothing for another server on the machine (another
 * bench's or a test's embedded PostgreSQL, which would take its whole time off the sum when it
 * stops); a server not found makes every process of its name count, as the other benches do.
 */
export async function serverProcesses(sql, natsUrl) {
  const [{ pid: backend }] = await sql`/* bench */ select pg_backend_pid() as pid`;
  const postmaster = readProcesses().find((p) => p.pid === backend && p.comm === "postgres")?.ppid ?? null;
  const natsPort = Number(new URL(natsUrl.split(",")[0]).port || 4222);
  const nats = listenerPid(natsPort, "nats-server");
  const groupOf = ({ pid, ppid, comm }) => {
    if (comm === "postgres" && (postmaster === null || pid === postmaster || ppid === postmaster)) return "postgres";
    if (comm === "nats-server" && (nats === null || pid === nats)) return "nats-server";
    return null;
  };
  return { postmaster, nats, groupOf };
}

/**
 * CPU time of the processes that serve a run: the load generator (this process), the server
 * under test (by pid), and every postgres and nats-server process. `measure(fn)` returns fn's
 * result, the CPU each group spent meanwhile, in microseconds, and its write system calls and
 * wake-ups (`calls`, as syscallsBetween answers them); both null without /proc.
 */
export function cpuMeter(serverPids) {
  const groupOf = ({ pid, comm }) =>
    pid === process.pid
      ? "load generator"
      : serverPids().includes(pid)
        ? "server"
        : comm === "postgres" || comm === "nats-server"
          ? comm
          : null;
  const sample = () => {
    const ticks = cpuTicks(groupOf);
    return ticks && { "load generator": 0, server: 0, postgres: 0, "nats-server": 0, ...ticks };
  };
  return {
    async measure(fn) {
      const before = sample();
      const calls = syscallCounts(groupOf);
      const result = await fn();
      return { result, cpu: cpuBetween(before, sample()), calls: syscallsBetween(calls, syscallCounts(groupOf)) };
    },
  };
}

/** CPU per request of each group, in microseconds, for one line of the report. */
export const fmtCpu = (cpu, requests) =>
  cpu === null
    ? "(no /proc: CPU not measured)"
    : Object.entries(cpu)
        .filter(([, us]) => us > 0)
        .map(([group, us]) => `${group} ${(us / Math.max(1, requests)).toFixed(0)}`)
        .join(", ") +
      ` (total ${(Object.values(cpu).reduce((a, b) => a + b, 0) / Math.max(1, requests)).toFixed(0)} µs/request)`;

/** The database states a bench runs in (BENCH_DB_STATE): an operator's first day, and a year on. */
export const DB_STATES = ["fresh", "history"];

/**
 * The database state this run measures, from BENCH_DB_STATE: `fresh` (the default: a migrated
 * database with nothing in it and no statistics, as an operator starts) or `history` (a copy of
 * the history template, see historyDatabase). bench/table.mjs runs each bench in both.
 */
export function dbState() {
  const state = process.env.BENCH_DB_STATE ?? "fresh";
  if (!DB_STATES.includes(state)) throw new Error(`BENCH_DB_STATE must be one of ${DB_STATES.join(", ")}: ${state}`);
  return state;
}

/** Notifications in the history template (BENCH_HISTORY_NOTIFICATIONS, at least a million by default). */
const HISTORY_NOTIFICATIONS = Number(process.env.BENCH_HISTORY_NOTIFICATIONS ?? 1_000_000);
const HISTORY_TEMPLATE = "notify_bench_history";
/** Bumped whenever seedHistory writes something else, so a cached template is rebuilt. */
const HISTORY_VERSION = 3;

const _withDatabase = (url, name) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

/** What the history template is built from: the migrations, the seed and its size. */
function historyKey() {
  const hash = createHash("sha256");
  for (const file of readdirSync(MIGRATIONS_FOLDER)
    .filter((f) => f.endsWith(".sql"))
    .sort()) {
    hash.update(file).update(readFileSync(`${MIGRATIONS_FOLDER}/${file}`));
  }
  return `${hash.digest("hex").slice(0, 16)}:${HISTORY_VERSION}:${HISTORY_NOTIFICATIONS}`;
}

/**
 * The template database notify_bench_history, built once and kept: a migrated database with
 * seedHistory's rows. Its comment names what it was built from (historyKey); a template built
 * from other migrations or another size is dropped and built again. Nothing analyses it: the
 * statistics it has are what autovacuum gathered meanwhile, as on an operator's server.
 */
async function historyTemplate() {
  const key = historyKey();
  const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  try {
    await admin`select pg_advisory_lock(7266052)`;
    const [found] = await admin`
      select shobj_description(oid, 'pg_database') as key from pg_database where datname = ${HISTORY_TEMPLATE}`;
    if (found?.key === key) return HISTORY_TEMPLATE;
    if (found) await admin.unsafe(`drop database ${HISTORY_TEMPLATE} with (force)`);
    console.error(`building ${HISTORY_TEMPLATE} (${HISTORY_NOTIFICATIONS} notifications; kept for later runs)...`);
    // A fresh migrated database that outlives this run, seeded, then renamed into place.
    const { url, database } = await freshDatabase({ teardown: () => {} });
    await database.close();
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    await seedHistory(sql, { notifications: HISTORY_NOTIFICATIONS });
    await sql.end();
    const name = new URL(url).pathname.slice(1);
    await admin.unsafe(`alter database ${name} rename to ${HISTORY_TEMPLATE}`);
    await admin.unsafe(`comment on database ${HISTORY_TEMPLATE} is '${key}'`);
    return HISTORY_TEMPLATE;
  } finally {
    await admin`select pg_advisory_unlock(7266052)`.catch(() => {});
    await admin.end();
  }
}

/**
 * A database of its own for one bench's service or floor, in `state` (BENCH_DB_STATE by
 * default): `fresh` is freshDatabase's; `history` is a copy of the history template
 * (CREATE DATABASE ... TEMPLATE), built on first use. Dropped on teardown, as freshDatabase's.
 */
export async function benchDatabase(t, state = dbState()) {
  if (state === "fresh") return freshDatabase(t);
  return freshDatabase(t, { template: await historyTemplate() });
}

/**
 * A history like a year of a running service's, written server-side into `sql`'s database:
 * `notifications` notifications over the last 30 days, in the log's daily partitions, to `users`
 * users with contacts, each with an email channel (every fifth an SMS channel too), delivered,
 * with their status history
 * (pending, sent, delivered), their attempt and their provider receipts (SendGrid's processed
 * and delivered, Plivo's delivered). Not analysed: that is autovacuum's to do, as in service.
 */
export async function seedHistory(
  sql,
  { notifications = HISTORY_NOTIFICATIONS, users = Math.max(1, Math.floor(notifications / 10)) } = {},
) {
  const n = notifications;
  // Ids as ingest makes them (UUIDv7 of the notification's time, which decides its partition of
  // the log), the row number in their last 48 bits; the same for every table of the seed.
  const base = new Date().toISOString();
  const at = sql`${base}::timestamptz - interval '30 days' * (${n}::int - i) / ${n}::int - interval '1 hour'`;
  const id = sql`overlay(notify_log_bound(${at}) placing '7' || lpad(to_hex(i % 4096), 3, '0') || '-8'
    || lpad(to_hex((i / 4096) % 4096), 3, '0') || '-' || lpad(to_hex(i), 12, '0') from 15)`;
  // The log as a service that has run for a month has it: a partition a day (the migrated
  // database's own, made from now on, are empty and go).
  for (const { suffix } of await sql`select suffix from notify_log_partitions where not is_default`) {
    await sql`select notify_log_detach(${suffix})`;
    await sql`select notify_log_drop(${suffix})`;
  }
  await sql`select notify_log_extend(${base}::timestamptz + interval '7 days', interval '1 day',
    ${base}::timestamptz - interval '31 days')`;
  await sql`insert into user_contacts (user_id, email, phone)
    select 'history-' || i, 'history-' || i || '@example.com', '+1415555' || lpad((i % 10000)::text, 4, '0')
    from generate_series(1, ${users}::int) i
    on conflict do nothing`;
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    select ${id}, 'history', 'history-' || (i % ${users}::int + 1), 'account', 'welcome',
      case when i % 5 = 4 then 'promotional' else 'transactional' end, jsonb_build_object('name', 'Ada ' || i),
      'history-' || i, md5(i::text), i % 16, ${at}
    from generate_series(1, ${n}::int) i`;
  // Every notification's channels: (i, channel, provider, provider id).
  const channels = sql`select i, ${id} as id, c.channel, c.provider, c.channel || '-history-' || i as provider_id,
      ${at} as at, 'history-' || (i % ${users}::int + 1) as user_id
    from generate_series(1, ${n}::int) i
    cross join (values ('email', 'sendgrid'), ('sms', 'plivo')) as c(channel, provider)
    where c.channel = 'email' or i % 5 = 0`;
  await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts,
      updated_at, routed_at, routed_status, user_id)
    select id, channel, 'delivered', provider, provider_id, 1, at + interval '2 seconds', at, 'pending', user_id
    from (${channels}) c`;
  await sql`insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, at, user_id)
    select id, channel, 1, 'sent', provider, provider_id, at + interval '1 second', user_id from (${channels}) c`;
  await sql`insert into channel_status_events (notification_id, channel, status, attempt, provider_id, at, user_id)
    select id, channel, s.status, s.attempt, case when s.attempt = 0 then null else provider_id end,
      at + s.after, user_id
    from (${channels}) c
    cross join (values ('pending', 0, interval '0'), ('sent', 1, interval '1 second'), ('delivered', 1, interval '2 seconds'))
      as s(status, attempt, after)
    order by i, channel, s.after`;
  // Each names its notification, as SendGrid's custom args and Plivo's report URL do: stored
  // under it, in its partition (drizzle/0031).
  await sql`insert into provider_receipts (provider, event_id, provider_id, status, payload, notification_id,
      received_at, applied_at)
    select provider, provider_id || '-' || r.status, provider_id, r.status,
      jsonb_build_object('event', r.status, 'message_id', provider_id, 'notification_id', id), id, at + r.after, at + r.after
    from (${channels}) c
    cross join (values ('processed', interval '1 second'), ('delivered', interval '2 seconds')) as r(status, after)
    where c.channel = 'email' or r.status = 'delivered'`;
}

/**
 * PostgreSQL's work on one database between two readings: the statements pg_stat_statements
 * counted there (calls, execution time, rows, WAL bytes, blocks dirtied), the rows written to
 * its tables (pg_stat_user_tables) and the WAL written by the whole server. `read()` answers a
 * reading; `between(a, b)` what happened in between. pg_stat_statements must be preloaded
 * (shared_preload_libraries): without it the statements are left out and `available` is false.
 * Statements whose text carries `/* bench *\/` (the bench's own polls) are left out.
 */
export async function pgWork(sql) {
  let available = true;
  try {
    await sql`create extension if not exists pg_stat_statements`;
    await sql`select 1 from pg_stat_statements limit 1`;
  } catch {
    available = false;
  }
  const read = async () => {
    const statements = available
      ? await sql`/* bench */ select queryid::text as id, min(query) as query, sum(calls)::float8 as calls,
            sum(total_exec_time)::float8 as ms, sum(rows)::float8 as rows, sum(wal_bytes)::float8 as wal,
            sum(shared_blks_dirtied)::float8 as dirtied
          from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
          group by queryid`
      : [];
    const [tables] = await sql`/* bench */ select
        coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::float8 as written,
        coalesce(sum(n_tup_hot_upd), 0)::float8 as hot, pg_current_wal_lsn()::text as lsn
      from pg_stat_user_tables`;
    return { statements: statements.filter((s) => !s.query.includes("/* bench */")), tables };
  };
  const between = async (a, b) => {
    const before = new Map(a.statements.map((s) => [s.id, s]));
    const statements = b.statements
      .map((s) => {
        const p = before.get(s.id);
        return {
          query: s.query,
          calls: s.calls - (p?.calls ?? 0),
          ms: s.ms - (p?.ms ?? 0),
          rows: s.rows - (p?.rows ?? 0),
          wal: s.wal - (p?.wal ?? 0),
          dirtied: s.dirtied - (p?.dirtied ?? 0),
        };
      })
      .filter((s) => s.calls > 0)
      .sort((x, y) => y.ms - x.ms);
    const [wal] =
      await sql`/* bench */ select pg_wal_lsn_diff(${b.tables.lsn}::pg_lsn, ${a.tables.lsn}::pg_lsn)::float8 as bytes`;
    return {
      available,
      statements,
      rowsWritten: b.tables.written - a.tables.written,
      hotUpdates: b.tables.hot - a.tables.hot,
      walBytes: wal.bytes,
    };
  };
  return { available, read, between };
}

/** The first words of a statement's text, on one line: enough to tell which one it is. */
const statementLabel = (query) => {
  const text = query.replace(/\s+/g, " ").trim();
  const table = /\b(?:insert into|update|delete from|from)\s+([a-z_]+)/i.exec(
    text.replace(/^with .*?\) (select|insert|update|delete)/i, "$1"),
  )?.[1];
  return `${text.slice(0, 70)}${text.length > 70 ? "…" : ""}${table ? ` [${table}]` : ""}`;
};

/** `pgWork`'s figures per delivered notification, and the costliest statements, as lines. */
export function pgWorkLines(work, per, top = 8) {
  if (work == null) return [];
  const calls = work.statements.reduce((n, s) => n + s.calls, 0);
  const ms = work.statements.reduce((n, s) => n + s.ms, 0);
  const lines = [
    `  PostgreSQL per delivery: ${work.available ? `${(calls / per).toFixed(1)} statements, ${((ms * 1000) / per).toFixed(0)} µs executing, ` : ""}${(work.rowsWritten / per).toFixed(1)} rows written (${work.rowsWritten > 0 ? ((100 * work.hotUpdates) / work.rowsWritten).toFixed(0) : 0}% HOT updates), ${(work.walBytes / per).toFixed(0)} WAL bytes`,
  ];
  if (!work.available) return [...lines, "  (pg_stat_statements not preloaded: statements not counted)"];
  for (const s of work.statements.slice(0, top)) {
    lines.push(
      `    ${(s.calls / per).toFixed(2)} calls, ${s.calls > 0 ? (s.ms / s.calls).toFixed(2) : 0} ms each, ${((s.ms * 1000) / per).toFixed(0)} µs/${(s.wal / per).toFixed(0)} WAL B per delivery: ${statementLabel(s.query)}`,
    );
  }
  return lines;
}
