// Every table of the schema, for drizzle-kit (drizzle.config.ts) and the modules' row types.
export { apiKeys, deploymentSecrets } from "./api-keys.js";
export { audienceMembers, audiences, broadcastProgress, broadcastRecipients, broadcasts } from "./audiences.js";
export { digestItems, digests, throttleSlots } from "./digests.js";
export { idempotencyKeys, idempotencyKeysLegacy } from "./idempotency.js";
export {
  INBOX_NOTIFY_CHANNEL,
  INBOX_STATE_NOTIFY_CHANNEL,
  inboxItemIds,
  inboxItems,
  inboxTokenRevocationCounts,
  inboxTokenRevocations,
  inboxTokens,
} from "./inbox.js";
export {
  channelStatusEventIds,
  channelStatusEvents,
  deliveryAttempts,
  notificationChannels,
  notificationFallbacks,
  notifications,
  providerReceipts,
  publishOutbox,
  sweepPositions,
  type TakenFallback,
} from "./notifications.js";
export {
  SUPPRESSIBLE_CHANNELS,
  SUPPRESSION_REASONS,
  type SuppressibleChannel,
  type SuppressionReason,
  type SuppressionSource,
  suppressions,
} from "./suppressions.js";
export { templates, templateVariants, templateVersions } from "./templates.js";
export {
  contactChanges,
  type DeviceToken,
  deferredNotifications,
  promotionalDailyCounts,
  type QuietHours,
  userContacts,
  userPreferences,
} from "./users.js";
export {
  webhookAttempts,
  webhookBroadcastTallies,
  webhookCompletionChecks,
  webhookDeliveries,
  webhookEndpoints,
  webhookEvents,
} from "./webhooks.js";
