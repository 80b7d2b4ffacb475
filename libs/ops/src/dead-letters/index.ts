export * from "./filter.js";
export * from "./plan.js";
export * from "./read.js";
export * from "./replay.js";
export * from "./replay-selected.js";
export * from "./responder.js";
