// The pieces of ingest that bench/ measures against its floors, named here so that a bench
// never reaches into the app's files.
export { DEDUP_WINDOW_HOURS } from "./notifications/idempotency.js";
export { prepareNotification } from "./notifications/prepare.js";
export { parseIdempotencyKey } from "./routes/notifications.js";
