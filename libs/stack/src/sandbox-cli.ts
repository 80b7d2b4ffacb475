import { startSendgridSandbox } from "@notify/providers";

// The SendGrid sandbox on its own (compose's `sandbox` service).
const sandbox = await startSendgridSandbox({
  port: Number(process.env.PORT ?? 3010),
  host: process.env.HOST ?? "0.0.0.0",
  apiKey: process.env.SANDBOX_API_KEY ?? "SG.sandbox",
});
process.stdout.write(`SendGrid sandbox listening at ${sandbox.url}\n`);
const stop = () => void sandbox.close().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
