import { applyTopology, connectBus } from "@notify/bus";
import { loadConfig } from "@notify/config";
import { createDb } from "@notify/db";
import { listen, mountHealth, newApp, onShutdown } from "@notify/http";
import { createLogger } from "@notify/log";
import { createSendgridProvider } from "@notify/providers";
import { WorkersConfig } from "./config.js";
import { startConsumers } from "./consumers.js";

const config = loadConfig(WorkersConfig, process.env);
const log = createLogger({ name: "workers", level: config.LOG_LEVEL });
const database = createDb({ url: config.DATABASE_URL, max: config.DB_POOL_SIZE, applicationName: "notify-workers" });
const bus = await connectBus({
  servers: config.NATS_URL,
  name: "notify-workers",
  namespace: config.NATS_NAMESPACE,
  partitions: config.LANE_PARTITIONS,
  waitOnFirstConnect: true,
});
await applyTopology(bus);
const guard = await bus.kv("notify_send_guard");

let stopping = false;
const app = newApp(log);
mountHealth(app, { postgres: () => database.ping(), nats: () => bus.isConnected() }, () => stopping);
const server = await listen(app, config.PORT, config.HOST);

const email = createSendgridProvider({
  apiKey: config.SENDGRID_API_KEY,
  baseUrl: config.SENDGRID_BASE_URL,
  from: config.EMAIL_FROM,
  fromName: config.EMAIL_FROM_NAME,
  timeoutMs: config.PROVIDER_TIMEOUT_MS,
});
const runners = await startConsumers({
  database,
  bus,
  guard,
  provider: email,
  log,
  maxAttempts: config.MAX_ATTEMPTS,
  retryBaseMs: config.RETRY_BASE_MS,
  retryMaxMs: config.RETRY_MAX_MS,
  transactionalConcurrency: config.TRANSACTIONAL_CONCURRENCY,
  promotionalConcurrency: config.PROMOTIONAL_CONCURRENCY,
});
log.info({ port: server.port, pools: runners.length, sendgrid: config.SENDGRID_BASE_URL }, "workers consuming");

onShutdown(log, config.SHUTDOWN_TIMEOUT_SECONDS * 1000, async () => {
  stopping = true;
  await Promise.all(runners.map((r) => r.stop()));
  await bus.close();
  await database.close();
  await server.close();
});
