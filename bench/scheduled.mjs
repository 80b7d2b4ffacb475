// node bench/scheduled.mjs: a burst of scheduled notifications all due at the same instant, as
// when a caller schedules a campaign for 09:00. BENCH_SCHEDULED transactional email
// notifications (100,000; the issue's million with BENCH_SCHEDULED=1000000) for BENCH_USERS users
// with contacts are stored by ingest's own group-commit statement with a send_at a day ahead and
// published to their lanes; the processor (as shipped: LOG_LEVEL info, its default partitions,
// DEFERRED_POLL_INTERVAL_MS) routes them into its timer (every channel deferred, reason
// scheduled). Then the bench moves every timer to one instant a few seconds ahead (the day
// passing, which nothing else can make quick) and measures, from that instant, how fast the
// processor's release routes them (work items published per second) and each one's lag behind
// its send time: when its work item reached JetStream, at p50, p99 and the last. CPU of the
// processor, postgres and nats-server over the release. BENCH_DB_STATE as the other benches.
import { createHash } from "node:crypto";
import { applyTopology, connectBus } from "@notify/bus";
import { newId, partitionOf } from "@notify/core";
import { acceptNotifications, seedTemplate } from "@notify/db";
import { SAMPLE_TEMPLATE, spawnApp } from "@notify/devstack";
import { freePort, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import { benchDatabase, benchNodeOptions, cpuMeter, dbState, profileEnv, summarize } from "./lib.mjs";

const SCHEDULED = Number(process.env.BENCH_SCHEDULED ?? 100_000);
const USERS = Number(process.env.BENCH_USERS ?? 10_000);
const LEAD_MS = Number(process.env.BENCH_LEAD_MS ?? 5_000 + SCHEDULED / 20);
const PARTITIONS = 16;
const BATCH = 512;
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { url, database } = await benchDatabase(t);
const { sql } = database;
const namespace = freshNamespace(t);
const bus = await connectBus({ servers: TEST_NATS_URL, name: "notify-bench", namespace, partitions: PARTITIONS });
teardowns.push(() => bus.close());
try {
  await applyTopology(bus);
  await seedTemplate(database, SAMPLE_TEMPLATE);
  const users = Array.from({ length: USERS }, (_, i) => `sched-user-${i}`);
  for (let i = 0; i < USERS; i += 5000)
    await sql`insert into user_contacts ${sql(users.slice(i, i + 5000).map((u) => ({ user_id: u, email: `${u}@example.com` })))}`;

  const sendAt = new Date(Date.now() + 86_400_000).toISOString();
  const started = performance.now();
  for (let i = 0; i < SCHEDULED; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, SCHEDULED - i) }, (_, k) => {
      const n = i + k;
      const id = newId();
      const request = {
        user_id: users[n % USERS],
        category: "account",
        template_id: "welcome",
        data: { name: `#${n}` },
        priority: "transactional",
        channels: ["email"],
        send_at: sendAt,
      };
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
        deliver_by: null,
        send_at: sendAt,
        fallback: null,
      };
    });
    const { createdAt } = await acceptNotifications(database, batch, 24);
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
            created_at: createdAt.toISOString(),
            send_at: sendAt,
          },
          r.id,
        ),
      ),
    );
  }
  await sql`delete from publish_outbox`;
  console.log(
    `stored and published ${SCHEDULED} scheduled notifications in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );

  const processor = spawnApp(
    "processor",
    {
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: namespace,
      LANE_PARTITIONS: String(PARTITIONS),
      PORT: String(await freePort()),
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      ...profileEnv(),
    },
    (_, line) => {
      if (/"level":(40|50|60)/.test(line)) console.error(`[processor] ${line}`);
    },
    benchNodeOptions(),
  );
  teardowns.push(() => processor.stop());

  // Routed into the timer: one row per notification.
  const routing = performance.now();
  for (;;) {
    if (processor.child.exitCode !== null) throw new Error("the processor exited");
    const [row] = await sql`select count(*)::int as n from deferred_notifications`;
    if (row.n >= SCHEDULED) break;
    await sleep(200);
  }
  console.log(`routed into the timer in ${((performance.now() - routing) / 1000).toFixed(1)} s`);
  if ((await bus.jsm.streams.info(bus.streams.work)).state.messages !== 0)
    throw new Error("work queued before its time");

  // The day passes: every timer is due at one instant a few seconds ahead.
  const due = new Date(Date.now() + LEAD_MS);
  await sql.begin(async (tx) => {
    // A million rows take longer than the pool's statement timeout.
    await tx`set local statement_timeout = 0`;
    await tx`update deferred_notifications set due_at = ${due}`;
  });
  const meter = cpuMeter(() => [processor.child.pid]);
  await sleep(Math.max(0, due.getTime() - Date.now()));
  const { result, cpu } = await meter.measure(async () => {
    for (;;) {
      if (processor.child.exitCode !== null) throw new Error("the processor exited");
      const work = (await bus.jsm.streams.info(bus.streams.work)).state.messages;
      if (work >= SCHEDULED) break;
      await sleep(100);
    }
    return { seconds: (Date.now() - due.getTime()) / 1000 };
  });

  // Each work item's lag behind the send time: when JetStream stored it. The stream keeps them in
  // the order stored, so the lag at a quantile is the stored time of the message at that place.
  const info = await bus.jsm.streams.info(bus.streams.work);
  const lagAt = async (q) => {
    const seq = info.state.first_seq + Math.min(SCHEDULED - 1, Math.floor(q * SCHEDULED));
    const m = await bus.jsm.streams.getMessage(bus.streams.work, { seq });
    return new Date(m.time).getTime() - due.getTime();
  };
  const lags = [await lagAt(0), await lagAt(0.5), await lagAt(0.99), await lagAt(1)];
  const early = lags[0] < 0 ? 1 : 0;
  const rate = SCHEDULED / result.seconds;
  const cpuUs = cpu ? (cpu.server + cpu.postgres + cpu["nats-server"]) / SCHEDULED : Number.NaN;
  console.log(
    `\n${SCHEDULED} notifications due at one instant (${USERS} users): routed in ${result.seconds.toFixed(1)} s, ${rate.toFixed(0)}/s`,
  );
  console.log(
    `  lag behind the send time: first ${lags[0]} ms, p50 ${lags[1]} ms, p99 ${lags[2]} ms, last ${lags[3]} ms`,
  );
  if (cpu)
    console.log(
      `  CPU per notification (µs): processor ${(cpu.server / SCHEDULED).toFixed(1)}, postgres ${(cpu.postgres / SCHEDULED).toFixed(1)}, nats-server ${(cpu["nats-server"] / SCHEDULED).toFixed(1)}`,
    );
  console.log(`database: ${dbState()}; the processor as shipped (LOG_LEVEL info)`);
  if (early > 0) throw new Error(`a work item was published ${-lags[0]} ms before its send time`);
  summarize({
    what: `scheduled burst, ${SCHEDULED} due at once`,
    notify: { cpuUs, rate },
    lagMs: { p50: lags[1], p99: lags[2], last: lags[3] },
    command: "npm run bench:scheduled",
  });
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
