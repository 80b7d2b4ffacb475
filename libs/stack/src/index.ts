export * from "./nats-server.js";
export * from "./paths.js";
export * from "./pglite.js";
export * from "./processes.js";
export * from "./stack.js";
