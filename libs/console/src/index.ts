export type { PublicApi } from "./api.js";
export type { ConsoleOptions } from "./context.js";
export { mountConsole } from "./mount.js";
export { consoleRefusal, SECURITY_HEADERS } from "./security.js";
export { createSessionStore, type SessionOptions, type SessionStore } from "./session.js";
