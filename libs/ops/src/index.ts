export * from "./audiences.js";
export * from "./broadcasts.js";
export * from "./dead-letters/index.js";
export * from "./keys.js";
export * from "./retention.js";
