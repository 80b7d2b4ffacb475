// The light door into the dev stack: the repository's paths, free ports, process checks, the
// guard that stops a child with its parent, and the local nats-server and embedded PostgreSQL,
// without the sandboxes and the stack (which load SMTP, mail parsing and certificate code). Test
// helpers load this in every test file; the stack itself comes from the package's "." entry
// point when a test starts one.
export { type Guard, guard, guardChild } from "./guardian.js";
export { findNatsServer, type LocalNats, natsInstallHelp, startLocalNats } from "./nats-server.js";
export { APPS, type AppName, ROOT } from "./paths.js";
export { isProcessOf, processAlive, readPidFile } from "./pids.js";
export { type RunningPostgres, startEmbeddedPostgres } from "./postgres.js";
export { freePort, portClaimed, portFree, rememberedPort } from "./state.js";
