export { run } from "./cli.js";
export { ArchiveConfig, CliConfig, NatsConfig } from "./config.js";
export { dlq } from "./dlq.js";
export { keys } from "./keys.js";
