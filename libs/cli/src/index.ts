export { run } from "./cli.js";
export { CliConfig, NatsConfig } from "./config.js";
export { dlq } from "./dlq.js";
export { keys } from "./keys.js";
