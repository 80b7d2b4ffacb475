export * from "./accept.js";
export * from "./lane.js";
export * from "./outbox.js";
export * from "./read.js";
