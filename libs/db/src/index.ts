// What @notify/db promises: every name the apps, @notify/ops, @notify/cli, @notify/testing,
// @notify/devstack and the benches import, by name, from the module of the stage that owns it
// (README.md). A name used only inside this package, or by its tests, is imported from its module.

export { DEDUP_WINDOW_HOURS, findIdempotencyRecords, purgeExpiredIdempotencyKeys } from "./accept/idempotency.js";
export { type AcceptedRow, acceptNotifications } from "./accept/notifications.js";
export { deleteSettledOutboxRows, narrowOutboxRow, removeUnpublished, sweepPublishOutbox } from "./accept/outbox.js";
export { readLatestTemplateParams } from "./accept/template-params.js";
export { perIteration, unnestColumns } from "./batch.js";
export { insertBroadcast } from "./broadcasts/accept.js";
export { cancelBroadcastExpansion, pauseBroadcastExpansion, resumeBroadcastExpansion } from "./broadcasts/control.js";
export { type ExpansionStep, expandBroadcastBatch } from "./broadcasts/expand.js";
export { type BroadcastProgress, listBroadcastProgress, readBroadcastProgress } from "./broadcasts/progress.js";
export { type DeliveryChannelRow, type DeliveryRef, loadChannel } from "./delivery/channel.js";
export {
  type ChannelState,
  type ReachProfile,
  readChannelStates,
  readReachProfile,
  readStatusEvents,
  resetChannelForReplay,
  type StatusEvent,
} from "./delivery/dead-letters.js";
export { readDeliveryHistory } from "./delivery/history.js";
export { storeInboxItem } from "./delivery/in-app.js";
export { removePushSubscription } from "./delivery/push-subscriptions.js";
export { type Attempt, moveStatus, recordAttempt } from "./delivery/status.js";
export { cancelDigestItem, type DigestItemCancel } from "./digests/cancel.js";
export { type DigestJoin, type Joined, joinDigest, joinedDigest } from "./digests/join.js";
export { DIGEST_DATA_MAX_BYTES, digestData, purgeSentDigests, sendDueDigests } from "./digests/send.js";
export {
  type ApiKeyRecord,
  createKey,
  getKey,
  InactiveMinterError,
  type IssuedApiKey,
  type KeyManager,
  listKeys,
  type RotatedApiKey,
  revokeKey,
  rotateKey,
} from "./directory/api-keys.js";
export {
  type AudienceRecord,
  createAudience,
  getAudience,
  type ImportResult,
  importAudienceMembers,
  listAudiences,
  setAudienceMember,
} from "./directory/audiences.js";
export {
  findActiveKeyByHash,
  findActiveKeyById,
  findKeyHash,
  listActiveKeyHashes,
  touchKeyLastUsed,
} from "./directory/authentication.js";
export { type ContactsRow, listContactChanges, readContacts, writeContacts } from "./directory/contacts.js";
export { loadCredentialKeys, loadUnsubscribeKey } from "./directory/deployment-secrets.js";
export {
  optOutCategory,
  type PreferencesPatch,
  type PreferencesRow,
  patchPreferences,
  readPreferences,
  writePreferences,
} from "./directory/preferences.js";
export {
  listTemplateSummaries,
  readTemplateVersion,
  type TemplateVersionRecord,
  writeTemplateVersion,
} from "./directory/templates.js";
export { readUserZones } from "./directory/time-zone.js";
export {
  countInboxItems,
  INBOX_FILTERS,
  INBOX_MARK_ACTIONS,
  type InboxCounts,
  type InboxMarkAction,
  inboxItemsSince,
  latestInboxItemId,
  listenForInboxItems,
  listenForInboxStates,
  listInboxItems,
  listInboxItemsAfter,
  markAllInboxItems,
  recentInboxCategories,
  setInboxItemState,
} from "./inbox/items.js";
export {
  type InboxTokenRevocation,
  insertInboxTokenRevocation,
  listInboxTokenRevocations,
  purgeExpiredInboxTokenRevocations,
} from "./inbox/revocations.js";
export { findInboxTokenOwner, type InboxOwner, insertInboxToken, purgeExpiredInboxTokens } from "./inbox/tokens.js";
export {
  type ChannelResultView,
  listUserNotificationRecords,
  type NotificationDigest,
  type NotificationRecord,
  readNotification,
  searchNotificationRecords,
} from "./lookup/records.js";
export { readNotificationTimeline, type TimelineEntry } from "./lookup/timeline.js";
export { createDb, type Database, type Sql } from "./pool.js";
export { liftCarrierOptOut } from "./receipts/opt-in.js";
export { purgeUnmatchedReceipts } from "./receipts/purge.js";
export {
  type AppliedReceipt,
  applyPendingReceipts,
  type Receipt,
  type RecordOptions,
  type RecordOutcome,
  recordReceipts,
} from "./receipts/record.js";
export {
  findUnroutedNotifications,
  findWaitingChannels,
  settleInAppFromInbox,
  settleWaitingChannel,
  touchWaitingChannel,
  type WaitingChannel,
} from "./reconciler/stalled.js";
export { readSweepPosition, saveSweepPosition, withSweepLock } from "./reconciler/sweep.js";
export { type ArchiveLine, type ArchiveRecord, restoreArchived, takeArchiveBatch } from "./retention/archive.js";
export {
  detachedLines,
  detachedPartitions,
  detachPartition,
  dropDetached,
  extendIdempotencyKeys,
  extendLog,
  type LogPartition,
  logPartitions,
  partitionsPastRetention,
  retireIdempotencyKeys,
} from "./retention/partitions.js";
export { type CancelableChannel, type CancelTransaction, cancelNotification } from "./routing/cancel.js";
export { listPendingChannels, recordRoutedChannels, settlePendingChannel } from "./routing/channels.js";
export { purgeCapCounts } from "./routing/daily-cap.js";
export {
  type DueDeferral,
  type DuePosition,
  listDueDeferrals,
  type ReleasedChannel,
  releaseDeferrals,
} from "./routing/deferrals.js";
export {
  endFallback,
  listOpenFallbacks,
  type OpenFallback,
  readFallbackRoutable,
  startFallbackWait,
  takeFallbackStep,
} from "./routing/fallbacks.js";
export { type ProfileRow, readProfileRow } from "./routing/profiles.js";
export { readLatestTemplateVersion, readTemplateVersionForRender } from "./routing/templates.js";
export { purgeThrottleSlots, type ThrottleLimit, type ThrottleTake } from "./routing/throttle.js";
export type { DeviceToken } from "./schema/index.js";
export {
  SUPPRESSIBLE_CHANNELS,
  SUPPRESSION_REASONS,
  type SuppressibleChannel,
  type SuppressionReason,
  type SuppressionSource,
} from "./schema/suppressions.js";
export { MIGRATIONS_FOLDER, runMigrations } from "./setup/migrate.js";
export { type AppRole, applyAppRoles, DB_APPS, type DbApp, dbPasswordVariable, dbRoleName } from "./setup/roles.js";
export { seedApiKey, seedContact, seedDeviceTokens, seedTemplate } from "./setup/seed.js";
export {
  addSuppressions,
  type NewSuppression,
  putSuppression,
  removeSuppression,
  type SuppressionEntry,
  suppressionsOf,
} from "./suppressions/entries.js";
export { listSuppressions, type SuppressionListQuery } from "./suppressions/list.js";
export {
  checkCompletions,
  DEFAULT_IN_FLIGHT,
  type DispatchRound,
  type DueDelivery,
  dispatchDue,
} from "./webhooks/dispatch.js";
export {
  createEndpoint,
  deleteEndpoint,
  type EndpointChange,
  type EndpointInput,
  getEndpoint,
  type IssuedWebhookEndpoint,
  listEndpoints,
  rotateEndpointSecret,
  updateEndpoint,
  type WebhookEndpointRecord,
} from "./webhooks/endpoints.js";
export {
  type DeadDeliveryView,
  type EndpointFigures,
  listDeadDeliveries,
  listWebhookAttempts,
  purgeWebhookHistory,
  type ReplaySelection,
  readEndpointFigures,
  replayWebhookEvents,
  sendWebhookPing,
  type WebhookAttemptView,
} from "./webhooks/operations.js";
export {
  type AttemptRecord,
  type ClaimedDelivery,
  claimDelivery,
  deferDelivery,
  recordWebhookAttempt,
} from "./webhooks/send.js";
