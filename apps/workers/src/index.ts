// What the workers app offers other packages: its start (apps/standalone runs it in one process
// with the others); the process itself starts from main.ts.
export { WorkersConfig } from "./config.js";
export { startWorkers } from "./start.js";
