import { createPrivateKey } from "node:crypto";
import { writeFileSync } from "node:fs";
import { startPlivoSandbox, startPushSandbox, startSendgridSandbox } from "@notify/providers";

// The provider sandboxes on their own (compose's `sandbox` service): SendGrid always, Plivo and
// Web Push when their ports are set.
const env = process.env;
const host = env.HOST ?? "0.0.0.0";
const sendgrid = await startSendgridSandbox({
  port: Number(env.PORT ?? 3010),
  host,
  apiKey: env.SANDBOX_API_KEY ?? "SG.sandbox",
  ...(env.SANDBOX_EVENT_WEBHOOK_URL ? { eventWebhookUrl: env.SANDBOX_EVENT_WEBHOOK_URL } : {}),
  // A fixed key lets receipts' SENDGRID_WEBHOOK_PUBLIC_KEY survive a sandbox restart.
  ...(env.SANDBOX_WEBHOOK_PRIVATE_KEY ? { webhookPrivateKey: createPrivateKey(env.SANDBOX_WEBHOOK_PRIVATE_KEY) } : {}),
});
process.stdout.write(
  `SendGrid sandbox listening at ${sendgrid.url}; events signed for key ${sendgrid.webhookPublicKey}\n`,
);
const closers = [() => sendgrid.close()];

if (env.PLIVO_SANDBOX_PORT) {
  const plivo = await startPlivoSandbox({
    port: Number(env.PLIVO_SANDBOX_PORT),
    host,
    authId: env.PLIVO_AUTH_ID ?? "MASANDBOX000000000000",
    authToken: env.PLIVO_AUTH_TOKEN ?? "plivo-sandbox-token",
  });
  process.stdout.write(`Plivo sandbox listening at ${plivo.url}\n`);
  closers.push(() => plivo.close());
}

if (env.PUSH_SANDBOX_PORT) {
  const push = await startPushSandbox({
    port: Number(env.PUSH_SANDBOX_PORT),
    host,
    ...(env.VAPID_PUBLIC_KEY ? { vapidPublicKey: env.VAPID_PUBLIC_KEY } : {}),
  });
  if (env.PUSH_CA_FILE) writeFileSync(env.PUSH_CA_FILE, push.ca);
  process.stdout.write(`Web Push sandbox listening at ${push.url} (CA at ${push.url}/sandbox/ca.pem)\n`);
  closers.push(() => push.close());
}

const stop = () => void Promise.all(closers.map((close) => close())).then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
