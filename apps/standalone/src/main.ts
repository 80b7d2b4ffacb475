import { loadConfig } from "@notify/config";
import { onShutdown } from "@notify/http";
import { createLogger } from "@notify/log";
import { startTelemetry } from "@notify/telemetry";
import { StandaloneConfig } from "./config.js";
import { appEnvironments, checkSettings, startAll } from "./run.js";

// The four apps in one process: for one machine (a small deployment, `npm start`), where one
// event loop serving all of them costs less CPU and memory than four. Each app keeps its own
// connections and ports; to scale one stage on its own, run the apps as their own processes.
const config = loadConfig(StandaloneConfig, process.env);
// Every app's settings first: one wrong exits 78 before anything runs.
checkSettings(appEnvironments(process.env, config));
// Then tracing, once for the four apps: the OpenTelemetry API is global to the process.
const telemetry = await startTelemetry({ service: "standalone", settings: config });
const log = createLogger({ name: "standalone", level: config.LOG_LEVEL });
const apps = startAll(process.env, config, log);
// Registered before the start ends: a SIGTERM while an app starts (waiting for NATS, say) stops
// the ones already running, and no other starts.
onShutdown(log, apps.shutdownTimeoutMs, async () => {
  await apps.stop();
  await telemetry.shutdown();
});
try {
  if (await apps.started)
    log.info(
      {
        ingest: config.INGEST_PORT,
        processor: config.PROCESSOR_PORT,
        workers: config.WORKERS_PORT,
        receipts: config.RECEIPTS_PORT,
      },
      "ingest, processor, workers and receipts running in one process",
    );
} catch (error) {
  log.fatal({ err: error }, "could not start the four apps");
  await telemetry.shutdown();
  process.exit(1);
}
