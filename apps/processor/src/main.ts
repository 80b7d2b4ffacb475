import { onShutdown } from "@notify/http";
import { startProcessor } from "./start.js";

const processor = await startProcessor(process.env);
onShutdown(processor.log, processor.shutdownTimeoutMs, processor.stop);
