import { onShutdown } from "@notify/http";
import { startIngest } from "./start.js";

const ingest = await startIngest(process.env);
onShutdown(ingest.log, ingest.shutdownTimeoutMs, ingest.stop);
