// The four apps in one process. Nothing imports it; main.ts is the process.
export { StandaloneConfig } from "./config.js";
export { appEnvironments, checkSettings, type RunningApps, startAll } from "./run.js";
