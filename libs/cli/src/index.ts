export * from "./cli.js";
export * from "./command.js";
export { dlq } from "./dlq.js";
export * from "./duration.js";
export { keys } from "./keys.js";
export * from "./table.js";
