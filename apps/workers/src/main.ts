import { onShutdown } from "@notify/http";
import { startWorkers } from "./start.js";

const workers = await startWorkers(process.env);
onShutdown(workers.log, workers.shutdownTimeoutMs, workers.stop);
