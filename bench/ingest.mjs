// npm run bench:ingest: POST /api/v1/notifications over HTTP on the real stack (real Postgres
// and NATS, full durability: commit + publish ack before 202) against references measured in
// the same run with the same load generator:
//   - a bare Hono hello-world (the ceiling for any Hono route, and the day's yardstick),
//   - the minimal durable ingest on bare Hono (bench/floor-server.mjs): the same batched insert
//     and acknowledged publish, and nothing else, i.e. what durability alone costs here, and
//   - the same with the checks every request must pass (FLOOR_CHECKS=1: key, bucket,
//     Idempotency-Key, validation, template parameters, request hash, answer headers).
// For each run it prints the CPU each process spent per request (load generator, server,
// postgres, nats-server), from /proc, and last the ratio of the service's CPU per request
// (server, postgres, nats-server) of each floor to ingest's. BENCH_CONNECTIONS (50),
// BENCH_SECONDS (10, per target), BENCH_ROUNDS (5: the targets take turns, so that load from
// elsewhere falls on all of them), BENCH_SETTLE_MS (1000: a turn's CPU is counted until this long
// after its load ends); BENCH_CPU_PROF_DIR=<dir> writes ingest's and the floors' V8 CPU profiles;
// BENCH_NODE_OPTIONS adds Node.js options to ingest and the floors (a profiler's, docs/benchmarks.md#profiles).
// Ingest runs as shipped (LOG_LEVEL info: an access line per request) but for the per-key rate
// limit, which it lifts (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST). Ingest and the floors each
// write to a database of their own in the run's state (BENCH_DB_STATE: fresh, or a copy of the
// history template, bench/lib.mjs; never analysed).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyTopology, connectBus } from "@notify/bus";
import { startStack } from "@notify/devstack";
import { freePort, freshNamespace } from "@notify/testing";
import {
  benchDatabase,
  benchNodeOptions,
  cpuMeter,
  dbState,
  fmt,
  fmtCpu,
  load,
  profileEnv,
  startFloor,
  startHello,
  summarize,
} from "./lib.mjs";

const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const natsUrl = process.env.TEST_NATS_URL ?? "nats://127.0.0.1:4222";
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

const { url } = await benchDatabase(t);
const namespace = freshNamespace(t);
const ingestPort = await freePort();
const stack = await startStack({
  dataDir: mkdtempSync(join(tmpdir(), "notify-bench-")),
  databaseUrl: url,
  natsUrl,
  namespace,
  basePort: ingestPort,
  ports: { ingest: ingestPort, sandbox: await freePort() },
  // Ingest alone: the processor and workers would compete for the same cores.
  apps: ["ingest"],
  seed: true,
  nodeOptions: benchNodeOptions(),
  // The benchmark measures ingest, not the inbound rate limit.
  env: { RATE_LIMIT_PER_SECOND: "1000000", RATE_LIMIT_BURST: "1000000", ...profileEnv() },
});
const helloPort = await freePort();
const hello = await startHello(helloPort);

// Each floor writes to its own database and namespace, with the same schema and topology.
async function floorServer(env) {
  const floorDb = await benchDatabase(t);
  const floorNamespace = freshNamespace(t);
  const topologyBus = await connectBus({
    servers: natsUrl,
    name: "notify-bench",
    namespace: floorNamespace,
    partitions: 8,
  });
  await applyTopology(topologyBus);
  await topologyBus.close();
  const port = await freePort();
  const server = await startFloor(port, {
    DATABASE_URL: floorDb.url,
    NATS_URL: natsUrl,
    NATS_NAMESPACE: floorNamespace,
    ...env,
    ...profileEnv(),
  });
  return { port, server };
}
const floor = await floorServer({});
const checked = await floorServer({ FLOOR_CHECKS: "1", FLOOR_API_KEY: stack.apiKey });
const bearer = { authorization: `Bearer ${stack.apiKey}` };

const body = JSON.stringify({
  user_id: "user-123",
  category: "account",
  template_id: "welcome",
  data: { name: "Ada" },
  priority: "transactional",
  channels: ["email"],
});
const targets = {
  hello: { url: `http://127.0.0.1:${helloPort}/`, headers: {}, pid: () => hello.pid },
  floor: { url: `http://127.0.0.1:${floor.port}/`, headers: {}, pid: () => floor.server.pid },
  checked: { url: `http://127.0.0.1:${checked.port}/`, headers: bearer, pid: () => checked.server.pid },
  ingest: {
    url: `${stack.baseUrl}/api/v1/notifications`,
    headers: bearer,
    pid: () => stack.apps.get("ingest")?.child.pid,
  },
};
// The same load generator for every target, a fresh Idempotency-Key per request included.
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 5));
/** Counts by group of two turns, summed (a group missing from the second counts 0 there). */
const sum = (x, y) => Object.fromEntries(Object.keys(x).map((k) => [k, x[k] + (y[k] ?? 0)]));
/**
 * Two turns of one target as one: requests, CPU, writes and wake-ups summed, the rate averaged,
 * the worse percentiles.
 */
const add = (a, b) => ({
  result: {
    rps: (a.result.rps + b.result.rps) / 2,
    p50: Math.max(a.result.p50, b.result.p50),
    p99: Math.max(a.result.p99, b.result.p99),
    non2xx: a.result.non2xx + b.result.non2xx,
    errors: a.result.errors + b.result.errors,
    total: a.result.total + b.result.total,
  },
  cpu: a.cpu && b.cpu ? sum(a.cpu, b.cpu) : null,
  calls:
    a.calls && b.calls
      ? { writes: sum(a.calls.writes, b.calls.writes), wakeups: sum(a.calls.wakeups, b.calls.wakeups) }
      : null,
});
// A turn's CPU is counted until its work has settled (group commits and publishes in flight,
// outbox deletes, the WAL writer): otherwise the tail of one target's turn lands on the next one.
const settleMs = Number(process.env.BENCH_SETTLE_MS ?? 1000);
const run = (target, duration) =>
  cpuMeter(() => [target.pid()]).measure(async () => {
    const result = await load({
      url: target.url,
      body,
      headers: target.headers,
      connections,
      seconds: duration,
      uniqueKeys: true,
    });
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    return result;
  });

try {
  console.log("warming up...");
  for (const target of Object.values(targets)) await run(target, 2);
  // The targets take turns, `rounds` times, and each one's figures are the sum of its turns: a
  // spell of load from elsewhere on the machine then falls on all of them, not on one.
  const results = {};
  const turns = [];
  for (let round = 0; round < rounds; round++) {
    const thisRound = {};
    for (const [name, target] of Object.entries(targets)) {
      const turn = await run(target, seconds / rounds);
      thisRound[name] = turn;
      results[name] = results[name] ? add(results[name], turn) : turn;
    }
    turns.push(thisRound);
  }

  const { hello: h, floor: f, checked: k, ingest: i } = results;
  console.log(`\nPOST, ${connections} connections, ${seconds} s each in ${rounds} turns`);
  console.log(`hono hello-world          ${fmt(h.result)}`);
  console.log(`minimal durable ingest    ${fmt(f.result)}`);
  console.log(`  + the request's checks  ${fmt(k.result)}`);
  console.log(`notify ingest             ${fmt(i.result)}`);
  console.log("\nCPU per request (µs), from /proc:");
  console.log(`  hello-world  ${fmtCpu(h.cpu, h.result.total)}`);
  console.log(`  minimal      ${fmtCpu(f.cpu, f.result.total)}`);
  console.log(`  + checks     ${fmtCpu(k.cpu, k.result.total)}`);
  console.log(`  ingest       ${fmtCpu(i.cpu, i.result.total)}`);
  // Writes and wake-ups per request: on loopback each write also runs the receiver's side of TCP,
  // and each wake-up of a waiting process costs it CPU.
  const perRequest = ({ calls, result }, kind) =>
    calls === null
      ? "(no /proc)"
      : ["server", "postgres", "nats-server"]
          .map((k) => `${k} ${((calls[kind][k] ?? 0) / Math.max(1, result.total)).toFixed(2)}`)
          .join(", ");
  console.log("\nwrite system calls / wake-ups per request, from /proc:");
  for (const [label, of] of [
    ["minimal", f],
    ["+ checks", k],
    ["ingest", i],
  ]) {
    console.log(`  ${label.padEnd(11)}${perRequest(of, "writes")} / ${perRequest(of, "wakeups")}`);
  }
  // The service's CPU per request: the server, postgres and nats-server, not the load generator.
  const service = ({ cpu, result }) =>
    cpu === null ? Number.NaN : (cpu.server + cpu.postgres + cpu["nats-server"]) / Math.max(1, result.total);
  const ratio = (a, b) => (service(b) / service(a)).toFixed(2);
  console.log(`\nreq/s: ingest / minimal durable ${(i.result.rps / f.result.rps).toFixed(2)}`);
  console.log(
    `service CPU per request: minimal ${service(f).toFixed(0)} µs, + checks ${service(k).toFixed(0)} µs, ingest ${service(i).toFixed(0)} µs`,
  );
  // Each round's own ratio too: a turn disturbed from elsewhere (a checkpoint, a vacuum) moves the
  // pooled figure, the median of the rounds much less.
  // Of an even count of rounds, the mean of the two middle ones (the lower alone understated it).
  const median = (xs) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length / 2;
    return Number.isInteger(mid) ? (sorted[mid - 1] + sorted[mid]) / 2 : sorted[Math.floor(mid)];
  };
  const perRound = (of) => turns.map((turn) => service(turn[of]) / service(turn.ingest));
  const rounded = (xs) => xs.map((x) => x.toFixed(2)).join(" ");
  const perTurn = (turn) => [turn.floor, turn.checked, turn.ingest].map((x) => service(x).toFixed(0)).join("/");
  console.log(`per round, service CPU per request (µs, minimal/checks/ingest): ${turns.map(perTurn).join("  ")}`);
  console.log(`per round (minimal durable / ingest): ${rounded(perRound("floor"))}`);
  console.log(`per round (with the checks / ingest): ${rounded(perRound("checked"))}`);
  console.log(
    `ratio (CPU per request, minimal durable / ingest): ${ratio(i, f)} pooled, ${median(perRound("floor")).toFixed(2)} median of the rounds`,
  );
  console.log(
    `ratio (CPU per request, minimal durable with the checks / ingest): ${ratio(i, k)} pooled, ${median(perRound("checked")).toFixed(2)} median of the rounds`,
  );
  console.log(
    `database: ${dbState()}; ingest as shipped (LOG_LEVEL info) but for the per-key rate limit, lifted (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST)`,
  );
  summarize({
    what: `ingest, one accepted request (${connections} connections)`,
    notify: { cpuUs: service(i), rate: i.result.rps },
    floor: { cpuUs: service(f), rate: f.result.rps },
    extra: { "floor with the checks": { cpuUs: service(k) } },
    ratio: service(f) / service(i),
    command: `BENCH_CONNECTIONS=${connections} npm run bench:ingest`,
  });
} finally {
  hello.kill();
  floor.server.kill();
  checked.server.kill();
  await stack.stop();
  for (const fn of teardowns.reverse()) await fn();
}
