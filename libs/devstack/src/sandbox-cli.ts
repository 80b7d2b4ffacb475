import { createPrivateKey } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SandboxTls } from "./sandboxes/certificates.js";
import { startPlivoSandbox } from "./sandboxes/plivo.js";
import { startSendgridSandbox } from "./sandboxes/sendgrid.js";
import { startSmtpSandbox } from "./sandboxes/smtp.js";
import { startWebhookReceiver } from "./sandboxes/webhooks.js";
import { startPushSandbox } from "./sandboxes/webpush.js";

// The provider sandboxes in a process of their own: compose's `sandbox` service, and `npm start`'s
// (apart from the stack's own process, so their answers never wait behind its log printing).
// SendGrid always; Plivo, Web Push, SMTP and the webhook receiver when their ports are set. With SANDBOX_JOURNAL_DIR,
// what they receive, their push subscriptions and their unanswered receipts survive a restart.
// Started with an IPC channel (npm start), it reports { ready: { sendgrid, plivo, push, smtp,
// smtpRelay, webhooks } } (smtp: the SMTP sandbox's HTTP routes; smtpRelay: its SMTP address) and exits
// when its parent goes.
const env = process.env;
const host = env.HOST ?? "0.0.0.0";
const journal = (name: string) => (env.SANDBOX_JOURNAL_DIR ? { journal: join(env.SANDBOX_JOURNAL_DIR, name) } : {});
const sendgrid = await startSendgridSandbox({
  port: Number(env.PORT ?? 3010),
  host,
  apiKey: env.SANDBOX_API_KEY ?? "SG.sandbox",
  ...(env.SANDBOX_EVENT_WEBHOOK_URL ? { eventWebhookUrl: env.SANDBOX_EVENT_WEBHOOK_URL } : {}),
  // A fixed key lets receipts' SENDGRID_WEBHOOK_PUBLIC_KEY survive a sandbox restart.
  ...(env.SANDBOX_WEBHOOK_PRIVATE_KEY ? { webhookPrivateKey: createPrivateKey(env.SANDBOX_WEBHOOK_PRIVATE_KEY) } : {}),
  ...journal("sendgrid.jsonl"),
});
process.stdout.write(
  `SendGrid sandbox listening at ${sendgrid.url}; events signed for key ${sendgrid.webhookPublicKey}\n`,
);
const closers = [() => sendgrid.close()];
const ready: Record<string, string> = { sendgrid: sendgrid.url };

if (env.PLIVO_SANDBOX_PORT) {
  const plivo = await startPlivoSandbox({
    port: Number(env.PLIVO_SANDBOX_PORT),
    host,
    authId: env.PLIVO_AUTH_ID ?? "MASANDBOX000000000000",
    authToken: env.PLIVO_AUTH_TOKEN ?? "plivo-sandbox-token",
    ...(env.PLIVO_SANDBOX_INBOUND_URL ? { inboundUrl: env.PLIVO_SANDBOX_INBOUND_URL } : {}),
    ...journal("plivo.jsonl"),
  });
  process.stdout.write(`Plivo sandbox listening at ${plivo.url}\n`);
  closers.push(() => plivo.close());
  ready.plivo = plivo.url;
}

if (env.PUSH_SANDBOX_PORT) {
  const push = await startPushSandbox({
    port: Number(env.PUSH_SANDBOX_PORT),
    host,
    ...(env.VAPID_PUBLIC_KEY ? { vapidPublicKey: env.VAPID_PUBLIC_KEY } : {}),
    // The same certificate across restarts: senders keep trusting the CA they were given.
    ...(env.PUSH_TLS_FILE ? { tls: JSON.parse(readFileSync(env.PUSH_TLS_FILE, "utf8")) as SandboxTls } : {}),
    ...journal("push.jsonl"),
  });
  if (env.PUSH_CA_FILE) writeFileSync(env.PUSH_CA_FILE, push.ca);
  process.stdout.write(`Web Push sandbox listening at ${push.url} (CA at ${push.url}/sandbox/ca.pem)\n`);
  closers.push(() => push.close());
  ready.push = push.url;
}

if (env.SMTP_SANDBOX_PORT) {
  const smtp = await startSmtpSandbox({
    port: Number(env.SMTP_SANDBOX_PORT),
    httpPort: Number(env.SMTP_SANDBOX_HTTP_PORT ?? 0),
    host,
    user: env.SMTP_SANDBOX_USER ?? "notify",
    password: env.SMTP_SANDBOX_PASSWORD ?? "smtp-sandbox-password",
    ...journal("smtp.jsonl"),
  });
  const relay = `smtp://${host}:${smtp.port}`;
  process.stdout.write(`SMTP sandbox listening at ${relay} (what it received: ${smtp.url}/sandbox/messages)\n`);
  closers.push(() => smtp.close());
  ready.smtp = smtp.url;
  ready.smtpRelay = relay;
}

if (env.WEBHOOK_SANDBOX_PORT) {
  const receiver = await startWebhookReceiver({ port: Number(env.WEBHOOK_SANDBOX_PORT), host });
  process.stdout.write(
    `Webhook receiver listening at ${receiver.url}/hooks/<name> (what it received: ${receiver.url}/sandbox/received)\n`,
  );
  closers.push(() => receiver.close());
  ready.webhooks = receiver.url;
}

// Once, whichever comes first: a signal, or the parent's end (the IPC channel closes).
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void Promise.all(closers.map((close) => close())).then(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
if (process.send) {
  process.send({ ready });
  process.on("disconnect", stop);
}
