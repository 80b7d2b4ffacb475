// npm run bench:ingest: POST /api/v1/notifications over HTTP on the real stack (real Postgres
// and NATS, full durability: commit + publish ack before 202) against two references measured
// in the same run with the same load generator:
//   - a bare Hono hello-world (the first ingest target was half of its req/s), and
//   - the minimal durable ingest on bare Hono (bench/floor-server.mjs): the same batched insert
//     and acknowledged publish, and nothing else, i.e. what durability alone costs here.
// For each run it also prints the CPU each process spent per request (load generator, server,
// postgres, nats-server), from /proc: on a machine where they all share the cores, that is
// what bounds the req/s.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyTopology, connectBus } from "@notify/bus";
import { startStack } from "@notify/devstack";
import { freePort, freshDatabase, freshNamespace } from "@notify/testing";
import { cpuMeter, fmt, fmtCpu, load, startFloor, startHello } from "./lib.mjs";

const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const natsUrl = process.env.TEST_NATS_URL ?? "nats://127.0.0.1:4222";
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

const { url } = await freshDatabase(t);
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
  logLevel: "warn",
  seed: true,
  // The benchmark measures ingest, not the inbound rate limit.
  env: { RATE_LIMIT_PER_SECOND: "1000000", RATE_LIMIT_BURST: "1000000" },
});
const helloPort = await freePort();
const hello = await startHello(helloPort);

// The floor server writes to its own database and namespace, with the same schema and topology.
const floorDb = await freshDatabase(t);
const floorNamespace = freshNamespace(t);
const topologyBus = await connectBus({
  servers: natsUrl,
  name: "notify-bench",
  namespace: floorNamespace,
  partitions: 8,
});
await applyTopology(topologyBus);
await topologyBus.close();
const floorPort = await freePort();
const floor = await startFloor(floorPort, {
  DATABASE_URL: floorDb.url,
  NATS_URL: natsUrl,
  NATS_NAMESPACE: floorNamespace,
});

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
  floor: { url: `http://127.0.0.1:${floorPort}/`, headers: {}, pid: () => floor.pid },
  ingest: {
    url: `${stack.baseUrl}/api/v1/notifications`,
    headers: { authorization: `Bearer ${stack.apiKey}` },
    pid: () => stack.apps.get("ingest")?.child.pid,
  },
};
// The same load generator for every target, a fresh Idempotency-Key per request included.
const run = (target, duration) =>
  cpuMeter(() => [target.pid()]).measure(() =>
    load({ url: target.url, body, headers: target.headers, connections, seconds: duration, uniqueKeys: true }),
  );

try {
  console.log("warming up...");
  for (const target of Object.values(targets)) await run(target, 2);
  const results = {};
  for (const [name, target] of Object.entries(targets)) results[name] = await run(target, seconds);

  const { hello: h, floor: f, ingest: i } = results;
  console.log(`\nPOST, ${connections} connections, ${seconds} s each`);
  console.log(`hono hello-world        ${fmt(h.result)}`);
  console.log(`minimal durable ingest  ${fmt(f.result)}`);
  console.log(`notify ingest           ${fmt(i.result)}`);
  console.log("\nCPU per request (µs), from /proc:");
  console.log(`  hello-world  ${fmtCpu(h.cpu, h.result.total)}`);
  console.log(`  minimal      ${fmtCpu(f.cpu, f.result.total)}`);
  console.log(`  ingest       ${fmtCpu(i.cpu, i.result.total)}`);
  console.log(`\nratio (ingest / hello-world req/s): ${(i.result.rps / h.result.rps).toFixed(3)}`);
  console.log(`ratio (minimal durable / hello-world): ${(f.result.rps / h.result.rps).toFixed(3)}`);
  console.log(`ratio (ingest / minimal durable): ${(i.result.rps / f.result.rps).toFixed(3)}`);
} finally {
  hello.kill();
  floor.kill();
  await stack.stop();
  for (const fn of teardowns.reverse()) await fn();
}
