import { connectBus } from "@notify/bus";
import { loadConfig } from "@notify/config";
import { createDb } from "@notify/db";
import { listen, onShutdown } from "@notify/http";
import { createLogger } from "@notify/log";
import { createApp } from "./app.js";
import { ReceiptsConfig } from "./config.js";

const config = loadConfig(ReceiptsConfig, process.env);
const log = createLogger({ name: "receipts", level: config.LOG_LEVEL });
const database = createDb({ url: config.DATABASE_URL, max: config.DB_POOL_SIZE, applicationName: "notify-receipts" });
const bus = await connectBus({
  servers: config.NATS_URL,
  name: "notify-receipts",
  namespace: config.NATS_NAMESPACE,
  partitions: config.LANE_PARTITIONS,
  waitOnFirstConnect: true,
});

let stopping = false;
const server = await listen(createApp({ database, bus, log, isStopping: () => stopping }), config.PORT, config.HOST);
log.info({ port: server.port }, "receipts listening");

onShutdown(log, config.SHUTDOWN_TIMEOUT_SECONDS * 1000, async () => {
  stopping = true;
  await server.close();
  await bus.close();
  await database.close();
});
