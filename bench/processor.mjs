// node bench/processor.mjs: the CPU apps/processor spends per routed notification, against the
// least a router has to do (bench/floor-processor.mjs: the same profile read, channel insert,
// acknowledged work publish and ack per notification, and nothing else) measured in the same
// run. Each gets a database of its own in the run's state (BENCH_DB_STATE: fresh, or a copy of
// the history template, bench/lib.mjs; never analysed) and a fresh NATS namespace, preloaded as
// ingest leaves its work: transactional email notifications of
// 'welcome' for users with contacts, stored by ingest's own group-commit statement (keys
// claimed, outbox settled) and published to their lane partitions. Then the process starts and
// drains the backlog; once the first BENCH_WARM are acknowledged (connections, JIT, template and
// preference caches warm), the window opens and runs until the lane is empty: wall time and the
// CPU of the process, postgres and nats-server (and of this one, polling), from /proc.
// Both run as shipped (LOG_LEVEL info, the processor's default partitions and concurrency).
//   BENCH_NOTIFICATIONS (20000, after BENCH_WARM 2000), BENCH_USERS (2000), BENCH_DB_STATE;
//   BENCH_CPU_PROF_DIR=<dir> writes the processor's and the floor's V8 CPU profiles there (bench/cpu-profile.mjs),
//   summarised by bench/profile-top.mjs (the profiler's own cost is then in the processor's numbers);
//   BENCH_NODE_OPTIONS adds Node.js options to the processor and the floor (docs/benchmarks.md#profiles).
import { createHash } from "node:crypto";
import { applyTopology, connectBus } from "@notify/bus";
import { newId, partitionOf } from "@notify/core";
import { acceptNotifications, seedTemplate } from "@notify/db";
import { SAMPLE_TEMPLATE, spawnApp } from "@notify/devstack";
import { freePort, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import {
  benchDatabase,
  benchNodeOptions,
  cpuMeter,
  dbState,
  floorExecArgv,
  forkChild,
  profileEnv,
  summarize,
} from "./lib.mjs";

const NOTIFICATIONS = Number(process.env.BENCH_NOTIFICATIONS ?? 20000);
const WARM = Number(process.env.BENCH_WARM ?? 2000);
const USERS = Number(process.env.BENCH_USERS ?? 2000);
// The processor's defaults (LANE_PARTITIONS, PARTITION_CONCURRENCY), given to both.
const PARTITIONS = 16;
const CONCURRENCY = 16;
// Ingest's maxBatch: notifications per group commit.
const BATCH = 512;
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const users = Array.from({ length: USERS }, (_, i) => `bench-user-${i}`);
// The same requests for both, as ingest turns them into rows (AcceptedRow) and lane messages.
const requests = Array.from({ length: WARM + NOTIFICATIONS }, (_, n) => {
  const request = {
    user_id: users[n % USERS],
    category: "account",
    template_id: "welcome",
    data: { name: `#${n}` },
    priority: "transactional",
    channels: ["email"],
  };
  const id = newId();
  return {
    id,
    client_id: "bench",
    key: id,
    request_hash: createHash("sha256").update(JSON.stringify(request)).digest("hex"),
    user_id: request.user_id,
    category: request.category,
    template_id: request.template_id,
    template_version: 1,
    priority: request.priority,
    channels: request.channels,
    data: request.data,
    partition: partitionOf(request.user_id, PARTITIONS),
  };
});

/** A database in the run's state and a fresh namespace holding the backlog as ingest leaves it, lane messages published. */
async function preload() {
  const { url, database } = await benchDatabase(t);
  const namespace = freshNamespace(t);
  const { sql } = database;
  await seedTemplate(database, SAMPLE_TEMPLATE);
  await sql`insert into user_contacts ${sql(users.map((u) => ({ user_id: u, email: `${u}@example.com`, phone: "+14155550199" })))}`;
  const bus = await connectBus({ servers: TEST_NATS_URL, name: "notify-bench", namespace, partitions: PARTITIONS });
  teardowns.push(() => bus.close());
  await applyTopology(bus);
  for (let i = 0; i < requests.length; i += BATCH) {
    const batch = requests.slice(i, i + BATCH);
    const { createdAt } = await acceptNotifications(database, batch, 24);
    const stored = createdAt.toISOString();
    await Promise.all(
      batch.map((r) =>
        bus.publish(
          bus.subjects.lane(r.priority, r.partition),
          {
            notification_id: r.id,
            client_id: r.client_id,
            user_id: r.user_id,
            category: r.category,
            template_id: r.template_id,
            template_version: r.template_version,
            priority: r.priority,
            channels: r.channels,
            data: r.data,
            created_at: stored,
          },
          r.id,
        ),
      ),
    );
  }
  // What ingest's settler does once the publishes are acknowledged.
  await sql`delete from publish_outbox`;
  return { url, namespace, sql, bus };
}

/** Lane messages not yet acknowledged. */
const backlog = async (bus) => (await bus.jsm.streams.info(bus.streams.lane("transactional"))).state.messages;

/** Polls until the backlog is at most `left`, failing if the process has exited. */
async function drainedTo(target, left) {
  for (;;) {
    if (target.exited()) throw new Error(`${target.name} exited`);
    if ((await backlog(target.bus)) <= left) return;
    await sleep(50);
  }
}

/** Warms the target up on the first WARM notifications, then measures the rest of the drain. */
async function run(target) {
  await drainedTo(target, NOTIFICATIONS);
  const { result, cpu } = await cpuMeter(() => [target.pid]).measure(async () => {
    const started = performance.now();
    const notifications = await backlog(target.bus);
    await drainedTo(target, 0);
    return { notifications, seconds: (performance.now() - started) / 1000 };
  });
  const [routed] = await target.sql`
    select count(*)::int as pending from notification_channels where status = 'pending'`;
  const work = (await target.bus.jsm.streams.info(target.bus.streams.work)).state.messages;
  if (routed.pending !== WARM + NOTIFICATIONS || work !== WARM + NOTIFICATIONS)
    throw new Error(
      `${target.name}: ${routed.pending} pending channels and ${work} work items for ${WARM + NOTIFICATIONS} notifications`,
    );
  return { name: target.name, ...result, cpu };
}

const appData = await preload();
const floorData = await preload();

const processor = spawnApp(
  "processor",
  {
    DATABASE_URL: appData.url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: appData.namespace,
    LANE_PARTITIONS: String(PARTITIONS),
    PARTITION_CONCURRENCY: String(CONCURRENCY),
    PORT: String(await freePort()),
    HOST: "127.0.0.1",
    // Its default level, as in production: nothing per notification.
    LOG_LEVEL: "info",
    ...profileEnv(),
  },
  (_, line) => {
    if (/"level":(40|50|60)/.test(line)) console.error(`[processor] ${line}`);
  },
  benchNodeOptions(),
);
teardowns.push(() => processor.stop());

const results = {};
try {
  results.processor = await run({
    name: "processor",
    ...appData,
    pid: processor.child.pid,
    exited: () => processor.child.exitCode !== null,
  });
  // Stopped before the floor runs: its periodic jobs would spend Postgres' and NATS' CPU in the floor's window.
  await processor.stop();
  const floor = forkChild(new URL("./floor-processor.mjs", import.meta.url), [], {
    execArgv: floorExecArgv(),
    env: {
      ...process.env,
      DATABASE_URL: floorData.url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: floorData.namespace,
      LANE_PARTITIONS: String(PARTITIONS),
      PARTITION_CONCURRENCY: String(CONCURRENCY),
      ...profileEnv(),
    },
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  teardowns.push(() => floor.kill());
  results.floor = await run({
    name: "floor",
    ...floorData,
    pid: floor.pid,
    exited: () => floor.exitCode !== null,
  });
} finally {
  for (const fn of teardowns.reverse()) await fn();
}

/** The service's CPU per notification (app, postgres, nats-server), in microseconds. */
const service = (r) => (r.cpu ? (r.cpu.server + r.cpu.postgres + r.cpu["nats-server"]) / r.notifications : Number.NaN);
const LABELS = { "load generator": "bench (polling)", postgres: "postgres", "nats-server": "nats-server" };
const rate = (r) => r.notifications / r.seconds;
const line = (r) =>
  [
    `  ${r.name.padEnd(9)} ${rate(r).toFixed(0).padStart(6)} notifications/s   ${r.notifications} routed in ${r.seconds.toFixed(2)} s`,
    r.cpu
      ? `            CPU per notification (µs): ${Object.entries(r.cpu)
          .map(([group, us]) => `${LABELS[group] ?? r.name} ${(us / r.notifications).toFixed(1)}`)
          .join(", ")}; ${r.name} + postgres + nats-server ${service(r).toFixed(1)}`
      : "            (no /proc: CPU not measured)",
  ].join("\n");

const { processor: app, floor: min } = results;
console.log(
  `\nRouting a backlog of transactional email notifications (${USERS} users, ${PARTITIONS} partitions x ${CONCURRENCY} in hand), after ${WARM} to warm up`,
);
console.log(line(app));
console.log(line(min));
console.log(`\nratio (processor / floor notifications/s): ${(rate(app) / rate(min)).toFixed(3)}`);
console.log(
  `ratio (floor CPU per notification / processor CPU per notification): ${(service(min) / service(app)).toFixed(3)} (${service(min).toFixed(1)} / ${service(app).toFixed(1)} µs, app + postgres + nats-server)`,
);
console.log(`database: ${dbState()}; the processor as shipped (LOG_LEVEL info)`);
summarize({
  what: "processor, one routed notification",
  notify: { cpuUs: service(app), rate: rate(app) },
  floor: { cpuUs: service(min), rate: rate(min) },
  ratio: service(min) / service(app),
  command: "npm run bench:processor",
});
