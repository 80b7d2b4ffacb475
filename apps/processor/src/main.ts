import { applyTopology, connectBus } from "@notify/bus";
import { loadConfig } from "@notify/config";
import { createDb } from "@notify/db";
import { listen, mountHealth, newApp, onShutdown } from "@notify/http";
import { createLogger } from "@notify/log";
import { ProcessorConfig } from "./config.js";
import { startConsumers } from "./consumers.js";
import { createRenderer } from "./routing/render.js";

const config = loadConfig(ProcessorConfig, process.env);
const log = createLogger({ name: "processor", level: config.LOG_LEVEL });
const database = createDb({ url: config.DATABASE_URL, max: config.DB_POOL_SIZE, applicationName: "notify-processor" });
const bus = await connectBus({
  servers: config.NATS_URL,
  name: "notify-processor",
  namespace: config.NATS_NAMESPACE,
  partitions: config.LANE_PARTITIONS,
  waitOnFirstConnect: true,
});
await applyTopology(bus);

let stopping = false;
const app = newApp(log);
mountHealth(app, { postgres: () => database.ping(), nats: () => bus.isConnected() }, () => stopping);
const server = await listen(app, config.PORT, config.HOST);

const runners = await startConsumers({
  database,
  bus,
  log,
  render: createRenderer(database),
  criticalCategories: config.CRITICAL_CATEGORIES,
  partitionConcurrency: config.PARTITION_CONCURRENCY,
});
log.info({ port: server.port, consumers: runners.length }, "processor consuming");

onShutdown(log, config.SHUTDOWN_TIMEOUT_SECONDS * 1000, async () => {
  stopping = true;
  await Promise.all(runners.map((r) => r.stop()));
  await bus.close();
  await database.close();
  await server.close();
});
