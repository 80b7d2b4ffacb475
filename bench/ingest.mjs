// npm run bench:ingest: POST /api/v1/notifications over HTTP on the real stack (real Postgres
// and NATS, full durability: commit + publish ack before 202) against a bare Hono
// hello-world measured in the same run on the same machine. Prints both and the ratio.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startStack } from "@notify/stack";
import { freePort, freshDatabase, freshNamespace } from "@notify/testing";
import { fmt, load, startHello } from "./lib.mjs";

const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

const { url } = await freshDatabase(t);
const namespace = freshNamespace(t);
const ingestPort = await freePort();
const stack = await startStack({
  dataDir: mkdtempSync(join(tmpdir(), "notify-bench-")),
  databaseUrl: url,
  natsUrl: process.env.TEST_NATS_URL ?? "nats://127.0.0.1:4222",
  namespace,
  basePort: ingestPort,
  ports: { ingest: ingestPort, sandbox: await freePort() },
  // Ingest alone: the processor and workers would compete for the same two cores.
  apps: ["ingest"],
  logLevel: "warn",
  seed: true,
  // The benchmark measures ingest, not the inbound rate limit.
  env: { RATE_LIMIT_PER_SECOND: "1000000", RATE_LIMIT_BURST: "1000000" },
});
const helloPort = await freePort();
const hello = await startHello(helloPort);

const body = JSON.stringify({
  user_id: "user-123",
  category: "account",
  template_id: "welcome",
  data: { name: "Ada" },
  priority: "transactional",
  channels: ["email"],
});
try {
  console.log(`warming up...`);
  await load({
    url: `${stack.baseUrl}/api/v1/notifications`,
    body,
    headers: { authorization: `Bearer ${stack.apiKey}` },
    connections,
    seconds: 2,
    uniqueKeys: true,
  });
  await load({ url: `http://127.0.0.1:${helloPort}/`, body, headers: {}, connections, seconds: 2, uniqueKeys: true });

  // The same load generator for both, a fresh Idempotency-Key per request included.
  const baseline = await load({
    url: `http://127.0.0.1:${helloPort}/`,
    body,
    headers: {},
    connections,
    seconds,
    uniqueKeys: true,
  });
  const ingest = await load({
    url: `${stack.baseUrl}/api/v1/notifications`,
    body,
    headers: { authorization: `Bearer ${stack.apiKey}` },
    connections,
    seconds,
    uniqueKeys: true,
  });
  console.log(`\nPOST /api/v1/notifications, ${connections} connections, ${seconds} s each`);
  console.log(`hono hello-world  ${fmt(baseline)}`);
  console.log(`notify ingest     ${fmt(ingest)}`);
  console.log(`ratio (ingest / hello-world req/s): ${(ingest.rps / baseline.rps).toFixed(3)}`);
} finally {
  hello.kill();
  await stack.stop();
  for (const fn of teardowns.reverse()) await fn();
}
