export { formatLine } from "./banner.js";
export { type ClusterStack, startClusterStack } from "./cluster.js";
export { findNatsServer, type LocalNats, natsInstallHelp, startLocalNats } from "./nats-server.js";
export { APPS, type AppName, ROOT } from "./paths.js";
export { isProcessOf, processAlive, readPidFile } from "./pids.js";
export { type RunningPostgres, startEmbeddedPostgres } from "./postgres.js";
export { APP_NODE_OPTIONS, type AppProcess, spawnApp, waitReady } from "./processes.js";
export { createSandboxTls } from "./sandboxes/certificates.js";
export {
  type PlivoInboundAnswer,
  PlivoInboundRequest,
  type PlivoJournalEntry,
  PlivoSandboxFault,
  startPlivoSandbox,
} from "./sandboxes/plivo.js";
export {
  createS3Sandbox,
  type RunningS3Sandbox,
  type S3SandboxObject,
  type S3SandboxOptions,
  startS3Sandbox,
} from "./sandboxes/s3.js";
export {
  createSendgridSandbox,
  SandboxAddressEventRequest,
  SandboxFault,
  type SandboxMail,
  type SendgridEvent,
  type SendgridJournalEntry,
  type StartSendgridSandboxOptions,
  startSendgridSandbox,
} from "./sandboxes/sendgrid.js";
export { startSmtpSandbox } from "./sandboxes/smtp.js";
export {
  createWebhookReceiver,
  type ReceivedWebhook,
  type RunningWebhookReceiver,
  startWebhookReceiver,
  WebhookReceiverFault,
} from "./sandboxes/webhooks.js";
export { type PushJournalEntry, startPushSandbox } from "./sandboxes/webpush.js";
export {
  SAMPLE_NOTIFICATION,
  SAMPLE_TEMPLATE,
  SAMPLE_USER,
  type Stack,
  type StackOptions,
  startStack,
} from "./stack.js";
export { freePort, portClaimed, portFree, rememberedPort, type StackState } from "./state.js";
