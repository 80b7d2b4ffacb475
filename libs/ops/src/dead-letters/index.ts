export * from "./filter.js";
export * from "./plan.js";
export * from "./read.js";
export * from "./replay.js";
export * from "./replay-responder.js";
export * from "./replay-selected.js";
