export * from "./banner.js";
export * from "./nats-server.js";
export * from "./paths.js";
export * from "./pids.js";
export * from "./processes.js";
export * from "./stack.js";
export * from "./state.js";
