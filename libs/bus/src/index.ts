export {
  type AppliedRow,
  applyTopology,
  busConfigFrom,
  DEFAULT_STREAM_SETTINGS,
  ensureTopology,
  TopologyMissingError,
  verifyTopology,
} from "./apply.js";
export {
  announceInboxTokensRevoked,
  announceKeyChanged,
  announceProfileChanged,
  announceTemplateChanged,
  onInboxTokensRevoked,
  onKeyChanged,
  onProfileChanged,
  onTemplateChanged,
  type ProfileChanged,
} from "./config-events.js";
export {
  type Bus,
  type BusConfig,
  connectBus,
  type JsMsg,
  type KV,
  type NatsConnection,
  type TopologyMode,
} from "./connection.js";
export { type ConsumerRunner, type Disposition, runConsumer } from "./consumer.js";
export {
  getDeadLetter,
  pageDeadLetterStream,
  readDeadLetterBatch,
  readDeadLetterStream,
  type StoredLetter,
  streamDeadLetters,
} from "./dead-letters.js";
export { isWrongLastSequence, judgeNatsError } from "./errors.js";
export { type ConsumerState, describeStreams, type StreamState } from "./inspect.js";
export { BUCKET_RETRY_MS, type BucketEvent, BucketMissingError, isBucketMissing } from "./kv-views.js";
export { type Leases, startLeases } from "./leases.js";
export { jsonBytes } from "./nats-client.js";
export { composeNatsConfig, NATS_CONF_FILE } from "./nats-config.js";
export { passwordVariable, ROLES, type Role } from "./nats-users.js";
export { oldestOnSubject } from "./oldest.js";
export { decodeJson, readPoisonMessages } from "./poison.js";
export { PublishRejectedError, PublishTimeoutError } from "./publisher.js";
export { answerRequests, type Reply, type Responder, requestReply } from "./requests.js";
export { claimGuard, type GuardEntry, isClaimable, readGuard, settleGuard } from "./send-guard.js";
export { bucketName, loadTopologyFile, streamName, subjectName, type Topology } from "./topology.js";
export {
  type BreakerDecision,
  type BreakerStateName,
  type LaneReport,
  type ProviderReport,
  readBreakerDecisions,
  readRateStates,
  readWorkerReports,
  removeWorkerReport,
  type WorkerReport,
  writeWorkerReport,
} from "./worker-reports.js";
