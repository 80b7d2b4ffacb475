export * from "./api-keys.js";
export * from "./audiences.js";
export * from "./idempotency.js";
export * from "./inbox.js";
export * from "./notifications.js";
export * from "./templates.js";
export * from "./users.js";
