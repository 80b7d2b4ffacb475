export { type AppEnv, type AppOptions, newApp, noteAccess } from "./app.js";
export { limitBody, readJson } from "./body.js";
export { clientAddress, type TrustedProxies, trustedProxies } from "./client-address.js";
export {
  DEPENDENCY_RETRY_AFTER_SECONDS,
  retryLogLevel,
  toAppError,
  unavailableDependency,
} from "./dependency-errors.js";
export { createForgettableCache } from "./forgettable-cache.js";
export { jsonResponse, promiseHeaders, responseHeaders } from "./headers.js";
export { createAdminApp, type HealthChecks, mountHealth, mountLiveness } from "./health.js";
export {
  type Counter,
  createMetrics,
  DURATION_BUCKETS,
  type Gauge,
  type Histogram,
  type Labels,
  METRICS_CONTENT_TYPE,
  MetricsRegistry,
  mountMetrics,
} from "./metrics.js";
export { PROBLEM_TYPE_BASE } from "./problem.js";
export {
  DEFAULT_SERVER_TIMEOUTS,
  type HttpServer,
  listen,
  onShutdown,
  type RunningApp,
  type ServerTimeouts,
  startScope,
} from "./server.js";
export { prepareStreams } from "./streams.js";
export { type AttemptBudget, type AttemptThrottle, addressBucket, createAttemptThrottle } from "./throttle.js";
export { createUnverifiedReads, type UnverifiedReadLimits, type UnverifiedReads } from "./unverified-reads.js";
export { type VersionLifecycle, versionLifecycle } from "./versioning.js";
