// What the ingest app offers other packages: its start (apps/standalone runs it in one process
// with the others); the process itself starts from main.ts.
export { IngestConfig } from "./config.js";
export { startIngest } from "./start.js";
