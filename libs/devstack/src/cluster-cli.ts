import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { formatLine } from "./banner.js";
import { startClusterStack } from "./cluster.js";
import { ROOT } from "./paths.js";
import { SAMPLE_NOTIFICATION } from "./stack.js";

// `npm run cluster`: the service as a multi-machine deployment runs it, on this machine: three
// nats-server processes in one JetStream cluster (streams and KV at three replicas), an embedded
// PostgreSQL, the provider sandboxes and two instances of every app. Its data lives in
// CLUSTER_DATA_DIR (.data-cluster); Ctrl-C stops everything.
const dataDir = process.env.CLUSTER_DATA_DIR ?? join(ROOT, ".data-cluster");
mkdirSync(dataDir, { recursive: true });
const say = (line: string) => process.stdout.write(`notify cluster: ${line}\n`);
const running = await startClusterStack({
  dataDir,
  logLevel: process.env.LOG_LEVEL ?? "info",
  onLine: (source, line) => process.stdout.write(formatLine(source, line)),
  say,
});
const { stack, cluster, ingestUrls } = running;
say(`ready. NATS: ${cluster.url}`);
say(`ingest: ${ingestUrls.join(" and ")} (either takes any request)`);
say(`API key: ${stack.apiKey}`);
say(
  `send through the second ingest: curl -sS -X POST ${ingestUrls[1]}/api/v1/notifications -H 'Authorization: Bearer ${stack.apiKey}' -H 'Content-Type: application/json' -H "Idempotency-Key: $(node -e 'console.log(crypto.randomUUID())')" -d '${JSON.stringify(SAMPLE_NOTIFICATION)}'`,
);
say(
  `read it through the first: curl -sS ${ingestUrls[0]}/api/v1/notifications/<notification_id> -H 'Authorization: Bearer ${stack.apiKey}'`,
);
say(`who holds which partition: nats --server ${cluster.nodes[0]?.url} kv get notify_leases leases`);
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  say("stopping");
  await running.stop();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
