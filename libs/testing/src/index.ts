/** A free TCP port on loopback. */
export { freePort } from "@notify/devstack/local";
export { deleteNamespace, freshBus, freshNamespace, streamCount } from "./bus.js";
export { countingDatabase, embeddedDatabase, freshDatabase } from "./database.js";
export { deadLetterOf } from "./dead-letters.js";
export {
  devKey,
  errorLines,
  getJson,
  getWithCa,
  killEverything,
  npmStart,
  postNotification,
  receivedByProviders,
  serverLogTrouble,
  serversAlive,
  settledView,
  stackEnv,
  stackMemory,
} from "./embedded.js";
export { eventually } from "./eventually.js";
export { captureLogger } from "./logger.js";
export { startNatsWithUsers } from "./nats-users.js";
export { idAt, inOutbox, seedNotification, settled } from "./notifications.js";
export { OTLP_KIND, type ReceivedSpan, startOtlpReceiver } from "./otlp.js";
export { proxiedDependencies, whileCut } from "./outage.js";
export { freshAppRoles } from "./postgres-roles.js";
export { TEST_NATS_URL, TEST_PG_URL } from "./services.js";
export { startTestStack } from "./stack.js";
export { startTcpProxy } from "./tcp-proxy.js";
