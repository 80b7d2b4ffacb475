// npm run bench:fanout: expands a broadcast to an audience of BENCH_MEMBERS (1,000,000) with
// the processor's expander (real Postgres and NATS: per batch one transaction inserting the
// notifications, recipient rows and outbox row and moving the cursor, the batch's lane publishes
// pipelined while the next batch is written), and reports recipients/s and the CPU per recipient
// of the expander, Postgres and nats-server, read from /proc, against two references in the same
// run: bench/floor-fanout.mjs, the least a durable expansion does (the same inserts and
// publishes, nothing else), and the same number of lane messages published alone. Peak resident
// memory is sampled every 100 ms, and the heap left after a collection is compared with the one
// before, for a small and the full audience: neither may grow with the audience. The ratio to
// the floor (CPU per recipient) is printed last. BENCH_BATCH (2000, the processor's
// BROADCAST_BATCH_SIZE), BENCH_PUBLISHING (the batches publishing at once; the expander's default),
// BENCH_DB_STATE (fresh, or a copy of the history template, bench/lib.mjs; never analysed).
const { connectBus, applyTopology } = await import("@notify/bus");
const { captureLogger, freshNamespace, TEST_NATS_URL } = await import("@notify/testing");
const { expandBroadcasts } = await import("@notify/processor/bench");
const { benchDatabase, cpuBetween, cpuTicks, dbState, summarize } = await import("./lib.mjs");
const { floorExpand } = await import("./floor-fanout.mjs");
const { setFlagsFromString } = await import("node:v8");
const { runInNewContext } = await import("node:vm");

// A collection on demand, for the heap that outlives an expansion (what it retains).
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc");
const heapMb = () => {
  gc();
  return process.memoryUsage().heapUsed / 1024 / 1024;
};

const MEMBERS = Number(process.env.BENCH_MEMBERS ?? 1_000_000);
const SMALL = Math.max(1, Math.floor(MEMBERS / 10));
const BATCH = Number(process.env.BENCH_BATCH ?? 2000);
const PUBLISHING = process.env.BENCH_PUBLISHING === undefined ? undefined : Number(process.env.BENCH_PUBLISHING);
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

const { database } = await benchDatabase(t);
const namespace = freshNamespace(t);
const bus = await connectBus({ servers: TEST_NATS_URL, name: "bench-fanout", namespace, partitions: 16 });
teardowns.push(() => bus.close());
await applyTopology(bus);
const { log } = captureLogger("bench");

/** CPU of this process (the expander), of Postgres and of nats-server, in µs. */
const cpuGroup = ({ pid, comm }) =>
  pid === process.pid ? "expander" : comm === "postgres" || comm === "nats-server" ? comm : null;
async function metered(fn) {
  const before = cpuTicks(cpuGroup);
  const result = await fn();
  return { ...result, cpu: cpuBetween(before, cpuTicks(cpuGroup)) };
}
const fmtCpu = (cpu, n) =>
  cpu === null
    ? "(no /proc)"
    : `CPU µs/recipient: ${Object.entries(cpu)
        .map(([group, us]) => `${group} ${(us / n).toFixed(1)}`)
        .join(", ")}, total ${(Object.values(cpu).reduce((a, b) => a + b, 0) / n).toFixed(1)}`;

function sampler() {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 100);
  return () => {
    clearInterval(timer);
    return Math.max(peak, process.memoryUsage().rss) / 1024 / 1024;
  };
}

async function expand(id, members) {
  await database.sql`insert into audiences (id, name) values (${id}, ${id})`;
  await database.sql`insert into audience_members (audience_id, user_id)
    select ${id}, 'user-' || lpad(n::text, 8, '0') from generate_series(1, ${members}) n`;
  await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
      data, status, total)
    values (${id}, 'bench', ${id}, 'h', ${id}, 'deals', 'promo', '{"name":"you"}', 'expanding', ${members})`;
  const heapBefore = heapMb();
  const peak = sampler();
  const started = performance.now();
  const { cpu } = await metered(async () => ({
    expanded: await expandBroadcasts({ database, bus, log }, BATCH, { publishing: PUBLISHING }),
  }));
  const seconds = (performance.now() - started) / 1000;
  return { rate: members / seconds, seconds, peakMb: peak(), retainedMb: heapMb() - heapBefore, cpu };
}

async function publishOnly(count) {
  const started = performance.now();
  for (let from = 0; from < count; from += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, count - from) }, (_, i) => `baseline-${from + i}`);
    await Promise.all(
      batch.map((id, i) =>
        bus.publish(
          bus.subjects.lane("promotional", i % 16),
          {
            notification_id: id,
            client_id: "bench",
            user_id: id,
            category: "deals",
            template_id: "promo",
            priority: "promotional",
            channels: null,
            data: { name: "you" },
            created_at: new Date().toISOString(),
          },
          id,
        ),
      ),
    );
  }
  return { rate: count / ((performance.now() - started) / 1000) };
}

const total = (cpu) => (cpu === null ? Number.NaN : Object.values(cpu).reduce((a, b) => a + b, 0));

async function floor(members) {
  gc();
  const started = performance.now();
  const { cpu } = await metered(async () =>
    floorExpand({ sql: database.sql, bus }, { audienceId: "full", broadcastId: "floor", batch: BATCH }),
  );
  return { rate: members / ((performance.now() - started) / 1000), cpu };
}

try {
  const small = await expand("small", SMALL);
  const full = await expand("full", MEMBERS);
  const minimal = await floor(MEMBERS);
  const baseline = await metered(() => publishOnly(MEMBERS));
  const fmt = (n) => Math.round(n).toLocaleString("en-US").padStart(9);
  console.log(`batch ${BATCH}, 16 lane partitions`);
  console.log(`publish only (NATS alone)    ${fmt(baseline.rate)} messages/s   ${fmtCpu(baseline.cpu, MEMBERS)}`);
  console.log(`minimal durable expansion    ${fmt(minimal.rate)} recipients/s   ${fmtCpu(minimal.cpu, MEMBERS)}`);
  console.log(
    `expand ${SMALL.toLocaleString("en-US").padStart(9)} members    ${fmt(small.rate)} recipients/s   peak RSS ${small.peakMb.toFixed(0)} MB, heap retained ${small.retainedMb.toFixed(1)} MB   ${fmtCpu(small.cpu, SMALL)}`,
  );
  console.log(
    `expand ${MEMBERS.toLocaleString("en-US").padStart(9)} members    ${fmt(full.rate)} recipients/s   peak RSS ${full.peakMb.toFixed(0)} MB, heap retained ${full.retainedMb.toFixed(1)} MB   ${fmtCpu(full.cpu, MEMBERS)}   (${full.seconds.toFixed(1)} s)`,
  );
  console.log(`target: 33,000 recipients/s (10 million pushes in 5 minutes): ${(full.rate / 33_000).toFixed(2)} of it`);
  // No expansion goes faster than its lane messages are stored: the ceiling of the rate here.
  console.log(`rate against the same messages published alone: ${(full.rate / baseline.rate).toFixed(2)}`);
  const ratio = total(minimal.cpu) / total(full.cpu);
  console.log(`ratio (floor / expand, CPU per recipient): ${ratio.toFixed(3)}`);
  console.log(`database: ${dbState()}`);
  summarize({
    what: `fan-out, one recipient of a ${MEMBERS.toLocaleString("en").replaceAll(",", " ")}-member audience`,
    notify: { cpuUs: total(full.cpu) / MEMBERS, rate: full.rate },
    floor: { cpuUs: total(minimal.cpu) / MEMBERS, rate: minimal.rate },
    ratio,
    command: "npm run bench:fanout",
  });
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
