// What the processor app offers other packages: its start (apps/standalone runs it in one process
// with the others); the process itself starts from main.ts.
export { ProcessorConfig } from "./config.js";
export { startProcessor } from "./start.js";
