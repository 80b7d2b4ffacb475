export {
  type ArchiveStore,
  ArchiveStoreError,
  folderStore,
  openArchiveStore,
  type S3StoreOptions,
  s3Store,
} from "./archive-store.js";
export { createEmptyAudience, findAudience, importMembersFromFile } from "./audiences.js";
export { broadcastProgress } from "./broadcasts.js";
export { CANCEL_QUEUE, cancelChannels, startCancelResponder } from "./cancel.js";
export {
  type DeadLetterFilters,
  latestPerChannel,
  matchesEveryFilter,
  matchesFilters,
  reasonMatches,
} from "./dead-letters/filter.js";
export { planReplay, REPLAY_REASON } from "./dead-letters/plan.js";
export {
  channelStates,
  findDeadLetter,
  pageDeadLetters,
  readDeadLetters,
  showDeadLetter,
  statusNow,
} from "./dead-letters/read.js";
export { replay } from "./dead-letters/replay.js";
export { replayDeadLetters } from "./dead-letters/replay-selected.js";
export { startDeadLetterResponder } from "./dead-letters/responder.js";
export { issueKey, listAllKeys, revokeKeyById, rotateKeyById } from "./keys.js";
export { PARTITION_ARCHIVE_CHUNK, type RetiredPartitions, retirePartitions } from "./partition-retention.js";
export {
  ARCHIVE_BATCH,
  ArchiveIntegrityError,
  type ArchiveManifest,
  archiveAll,
  archiveBatch,
  DEFAULT_RETENTION_DAYS,
  type NotificationRestore,
  restoreNotification,
  restoreUser,
} from "./retention.js";
export {
  addSuppressionEntry,
  exportSuppressionsCsv,
  importSuppressionsFromFile,
  isClientId,
  isSuppressibleChannel,
  isSuppressionReason,
  MAX_SUPPRESSION_NOTE,
  noteProblem,
  pageSuppressions,
  removeSuppressionEntry,
  SUPPRESSION_CSV_COLUMNS,
  SUPPRESSION_IMPORT_BATCH,
  type SuppressionFilter,
  type SuppressionImportOptions,
  type SuppressionImportSummary,
  suppressionTarget,
} from "./suppressions.js";
