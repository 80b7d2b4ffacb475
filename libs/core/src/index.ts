export { hashKey, keyDisplayPrefix, SCOPES, type Scope, scopesInclude } from "./api-keys.js";
export {
  MAX_MEMBER_LINE_BYTES,
  MEMBER_BATCH,
  MEMBER_FORMATS,
  type MemberFormat,
  memberBatches,
  parseMemberLine,
} from "./audience.js";
export {
  CANCEL_REASON,
  CANCEL_RESULTS,
  type CancelAnswer,
  type CancelByGuard,
  type CancelByStatus,
  CancelMessage,
  type CancelResult,
  type ChannelCancel,
  cancelByGuard,
  cancelByStatus,
} from "./cancel.js";
export {
  CHANNEL_STATUSES,
  type ChannelStatus,
  canTransition,
  isFinal,
  statusesMovableTo,
} from "./channel-status.js";
export { CHANNELS, type Channel, isChannel, PRIORITIES, type Priority } from "./channels.js";
export {
  type CredentialKeys,
  credentialKeys,
  generateSignedKey,
  type InboxTokenClaims,
  isSignedInboxToken,
  keyForm,
  newDeploymentSecret,
  signInboxToken,
  verifyInboxToken,
} from "./credentials.js";
export { decodeCursor, encodeCursor, type KeysetPosition } from "./cursor.js";
export {
  DEAD_LETTER_CLASSES,
  type DeadLetter,
  type DeadLetterAttempt,
  type DeadLetterClass,
  type DeadLetterNotification,
} from "./dead-letter.js";
export {
  DeadLetterListRequest,
  type DeadLetterPage,
  type DeadLetterShown,
  DeadLetterShowRequest,
} from "./dead-letter-reads.js";
export {
  deadLetterFilters,
  REPLAY_BATCH_LIMIT,
  REPLAY_SCAN_LIMIT,
  type ReplayAnswer,
  ReplayMessage,
  ReplayRequest,
  RequestedBy,
} from "./dead-letter-replay.js";
export {
  deadlineProblem,
  type ExpiryReason,
  isPastDeadline,
  MAX_DEADLINE_SECONDS,
  parseRfc3339,
  secondsLeft,
} from "./deliver-by.js";
export {
  type AcceptedAddress,
  type AddressKind,
  type AddressResult,
  type AttemptCount,
  type AttemptInput,
  backoffMs,
  classifyAnswer,
  countAttempt,
  countsAgainstProvider,
  DEFAULT_FAILOVER_AFTER_ATTEMPTS,
  type DeadlineDecision,
  type DeliveryDecision,
  decideAtDeadline,
  decideDelivery,
  decideProvider,
  decideResume,
  type ProviderAnswer,
  type ProviderDecision,
  type ProviderInput,
  type ProviderView,
  parkDelayMs,
  type ResumeDecision,
  type ResumeInput,
  runAttempts,
  SENDABLE,
} from "./delivery-policy.js";
export {
  DEFAULT_DIGEST_MAX_ITEMS,
  DIGEST_MAX_ITEMS,
  DIGEST_WINDOW_MS,
  DigestRequest,
  type DigestSpec,
  parseDuration,
  THROTTLE_MAX_LIMIT,
  THROTTLE_PER_MS,
  ThrottleRequest,
  type ThrottleSpec,
} from "./digest.js";
export { AppError, ERROR_CODES, ERROR_TITLES, type ErrorCode, type FieldError, isAppError } from "./errors.js";
export {
  decideFallback,
  FALLBACK_CONDITIONS,
  type FallbackCondition,
  FallbackStep,
  fallbackProblems,
} from "./fallback.js";
export { isUuid, newId } from "./ids.js";
export { instant } from "./instant.js";
export { type BucketDecision, type BucketLimits, leak } from "./leaky-bucket.js";
export { canonicalLocale, localeFallbackChain } from "./locale.js";
export { andThen, type MaybePromise } from "./maybe-promise.js";
export { isPrivateAddress, privateHostProblem } from "./network.js";
export {
  type ChannelResult,
  LaneMessage,
  NotificationRequest,
  type NotificationView,
  schemaProblem,
  WorkItem,
} from "./notification.js";
export {
  NOTIFICATION_STATUS_DESCRIPTIONS,
  NOTIFICATION_STATUSES,
  type NotificationStatus,
  notificationStatus,
} from "./notification-status.js";
export { partitionOf } from "./partition.js";
export {
  type ChannelDecision,
  capDay,
  countsTowardCap,
  decideRouting,
  type PolicyInput,
  type PolicyPreferences,
  type SuppressionReason,
} from "./preference-policy.js";
export {
  base64UrlBytes,
  CATEGORY_PATTERN,
  DEFAULT_PREFERENCES,
  pushEndpointProblem,
  sortChannels,
  webPushKeyProblems,
} from "./preferences.js";
export {
  firstInstantAt,
  isTimeZone,
  localDate,
  parseClock,
  type QuietHours,
  quietWindowAt,
  wallTime,
} from "./quiet-hours.js";
export {
  MAX_SCHEDULE_DAYS,
  parseLocalDate,
  resolveSendAtLocal,
  type SendAtLocal,
  sendAtProblem,
  userZone,
} from "./schedule.js";
export { GUARD_STATES, type GuardState, type GuardValue, guardKey } from "./send-guard.js";
export {
  ADDRESS_SUPPRESSED,
  holdingEntry,
  type SuppressionHold,
  suppressionDetail,
} from "./suppression-hold.js";
export { suppressionAddress } from "./suppressions.js";
export {
  checkTemplate,
  formatTemplateProblem,
  isHtmlBody,
  MAX_BODY_TEMPLATE_LENGTH,
  MAX_SUBJECT_LENGTH,
  missingParams,
  PARAM_NAME,
  subjectProblem,
  TEMPLATE_ID_PATTERN,
  type TemplateProblem,
  TemplateRenderError,
  TemplateSyntaxError,
  templateEngineOptions,
} from "./template/index.js";
export { type ThrottleRule, type ThrottleSlot, throttleAllows, throttleOutcome, throttleRule } from "./throttle.js";
export {
  availableTokens,
  type LaneBuckets,
  type LaneCounts,
  type LaneRates,
  type RateLimit,
  splitRate,
  takeForLanes,
  takeTokens,
} from "./token-bucket.js";
export { traceIdOf } from "./traceparent.js";
export {
  listUnsubscribeHeaders,
  offersUnsubscribe,
  signUnsubscribeToken,
  type UnsubscribableEmail,
  type UnsubscribeClaims,
  type UnsubscribeSettings,
  unsubscribeKey,
  verifyUnsubscribeToken,
} from "./unsubscribe.js";
export { validate } from "./validate.js";
export {
  DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS,
  decideWebhookAttempt,
  newWebhookEndpointId,
  newWebhookSecret,
  parseRetrySchedule,
  recipientOf,
  shouldDisableEndpoint,
  WEBHOOK_EVENT_DESCRIPTIONS,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_INCLUDES,
  type WebhookAnswer,
  type WebhookDecision,
  type WebhookEnvelope,
  type WebhookEventType,
  type WebhookInclude,
  webhookEnvelope,
  webhookMessageId,
  webhookUrlProblem,
} from "./webhooks.js";
export { TIMED_OUT, withDeadline } from "./with-deadline.js";
