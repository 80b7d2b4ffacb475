export * from "./api-keys.js";
export * from "./audience.js";
export {
  CHANNEL_STATUSES,
  type ChannelStatus,
  canTransition,
  isFinal,
  statusesMovableTo,
} from "./channel-status.js";
export * from "./channels.js";
export * from "./credentials.js";
export * from "./cursor.js";
export {
  DEAD_LETTER_CLASSES,
  type DeadLetter,
  type DeadLetterAttempt,
  type DeadLetterClass,
  type DeadLetterNotification,
} from "./dead-letter.js";
export * from "./dead-letter-reads.js";
export * from "./dead-letter-replay.js";
export * from "./deadline.js";
export {
  type AcceptedAddress,
  type AddressKind,
  type AddressResult,
  type AttemptInput,
  backoffMs,
  classifyAnswer,
  countsAgainstProvider,
  type DeliveryDecision,
  decideDelivery,
  type ProviderAnswer,
} from "./delivery-policy.js";
export * from "./errors.js";
export * from "./fallback.js";
export * from "./ids.js";
export * from "./instant.js";
export * from "./leaky-bucket.js";
export * from "./locale.js";
export * from "./maybe-promise.js";
export * from "./network.js";
export * from "./notification.js";
export {
  NOTIFICATION_STATUS_DESCRIPTIONS,
  NOTIFICATION_STATUSES,
  type NotificationStatus,
  notificationStatus,
} from "./notification-status.js";
export * from "./partition.js";
export * from "./policy.js";
export * from "./preferences.js";
export * from "./quiet-hours.js";
export { GUARD_STATES, type GuardState, type GuardValue, guardKey } from "./send-guard.js";
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
export * from "./token-bucket.js";
export * from "./traceparent.js";
export * from "./validate.js";
export * from "./with-deadline.js";
