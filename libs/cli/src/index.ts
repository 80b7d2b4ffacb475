export { run } from "./cli.js";
export { dlq } from "./dlq.js";
export { keys } from "./keys.js";
