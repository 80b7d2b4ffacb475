import { onShutdown } from "@notify/http";
import { startReceipts } from "./start.js";

const receipts = await startReceipts(process.env);
onShutdown(receipts.log, receipts.shutdownTimeoutMs, receipts.stop);
