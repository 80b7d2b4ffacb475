// What the receipts app offers other packages: its start (apps/standalone runs it in one process
// with the others); the process itself starts from main.ts.
export { ReceiptsConfig } from "./config.js";
export { startReceipts } from "./start.js";
