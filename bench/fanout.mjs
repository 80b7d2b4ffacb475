// npm run bench:fanout: expands a broadcast to an audience of BENCH_MEMBERS (1,000,000) with
// the processor's expander (real Postgres and NATS: per batch one transaction inserting the
// notifications and recipient rows with unnest and moving the cursor, then the batch's lane
// publishes pipelined and one statement marking them published), and reports recipients/s,
// against a baseline measured in the same run: the same number of lane messages published
// alone, pipelined the same way. Peak resident memory is sampled every 100 ms, for a small and
// the full audience: it must not grow with the audience.
const { connectBus, applyTopology } = await import("@notify/bus");
const { captureLogger, freshDatabase, freshNamespace, TEST_NATS_URL } = await import("@notify/testing");
const { expandBatch } = await import("@notify/processor/broadcasts/expander");

const MEMBERS = Number(process.env.BENCH_MEMBERS ?? 1_000_000);
const SMALL = Math.max(1, Math.floor(MEMBERS / 10));
const BATCH = Number(process.env.BENCH_BATCH ?? 1000);
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

const { database } = await freshDatabase(t);
const namespace = freshNamespace(t);
const bus = await connectBus({ servers: TEST_NATS_URL, name: "bench-fanout", namespace, partitions: 16 });
teardowns.push(() => bus.close());
await applyTopology(bus);
const { log } = captureLogger("bench");

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
  global.gc?.();
  const peak = sampler();
  const started = performance.now();
  for (;;) if ((await expandBatch({ database, bus, log }, BATCH)).kind === "finished") break;
  const seconds = (performance.now() - started) / 1000;
  return { rate: members / seconds, seconds, peakMb: peak() };
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
  return count / ((performance.now() - started) / 1000);
}

try {
  const small = await expand("small", SMALL);
  const full = await expand("full", MEMBERS);
  const baseline = await publishOnly(MEMBERS);
  const fmt = (n) => Math.round(n).toLocaleString("en-US").padStart(9);
  console.log(`batch ${BATCH}, 16 lane partitions`);
  console.log(`publish only (baseline)      ${fmt(baseline)} messages/s`);
  console.log(
    `expand ${SMALL.toLocaleString("en-US").padStart(9)} members    ${fmt(small.rate)} recipients/s   peak RSS ${small.peakMb.toFixed(0)} MB`,
  );
  console.log(
    `expand ${MEMBERS.toLocaleString("en-US").padStart(9)} members    ${fmt(full.rate)} recipients/s   peak RSS ${full.peakMb.toFixed(0)} MB   (${full.seconds.toFixed(1)} s)`,
  );
  console.log(`ratio (expand / publish only): ${(full.rate / baseline).toFixed(3)}`);
  console.log(`plan: 33,000/s (10 million pushes in 5 minutes): ${(full.rate / 33_000).toFixed(2)} of it`);
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
