import { existsSync } from "node:fs";
import { join } from "node:path";
import { bool, type ConfigError, int, parseConfig, port } from "@notify/config";
import * as v from "valibot";
import { banner, formatLine } from "./banner.js";
import { appsStopped, writeDevEnv } from "./dev.js";
import { ROOT } from "./paths.js";
import { startStack } from "./stack.js";

// `npm start`: the whole service on this machine with embedded defaults. The shell's environment
// and the repository's `.env` (which the shell's values override) reach every app.
// With --dev (`turbo dev`): the same Postgres, NATS, sandboxes, migrations and seed, but the apps
// are turbo's own `dev` tasks (node --watch from source): they find their settings in
// <DATA_DIR>/dev.json (scripts/dev-app.mjs).
const dev = process.argv.includes("--dev");
const dotenv = join(ROOT, ".env");
if (existsSync(dotenv)) process.loadEnvFile(dotenv);

const Config = v.object({
  /** Use this Postgres instead of the embedded PostgreSQL. */
  DATABASE_URL: v.optional(v.pipe(v.string(), v.url("must be a URL"))),
  /** Use this NATS (under a namespace of this data folder) instead of the stack's own nats-server. */
  NATS_URL: v.optional(v.pipe(v.string(), v.minLength(1))),
  NATS_SERVER_BIN: v.optional(v.string()),
  NATS_NAMESPACE: v.optional(v.string()),
  /** Ingest port; processor, workers and receipts take the next three, the sandboxes +10..15, the inbox demo +16. 0: free ports, kept. */
  PORT: port(3000),
  LANE_PARTITIONS: int(16, 1, 64),
  /** Where the stack's own data lives (Postgres cluster, nats-server store, sandboxes, the development key). */
  DATA_DIR: v.optional(v.string(), join(ROOT, ".data")),
  LOG_LEVEL: v.optional(v.string(), "info"),
  /** true: the four apps in one process (apps/standalone), which takes less memory and CPU on one machine. */
  ONE_PROCESS: bool(false),
});

let config: v.InferOutput<typeof Config>;
try {
  config = parseConfig(Config, process.env);
} catch (error) {
  process.stderr.write(`${(error as ConfigError).message}\n`);
  process.exit(78);
}

process.stdout.write("Starting notify: Postgres, NATS, migrations, sandboxes and the four apps...\n");
let stopping = false;
let stack: Awaited<ReturnType<typeof startStack>>;
try {
  stack = await startStack({
    dataDir: config.DATA_DIR,
    ...(config.DATABASE_URL ? { databaseUrl: config.DATABASE_URL } : {}),
    ...(config.NATS_URL ? { natsUrl: config.NATS_URL } : {}),
    ...(config.NATS_SERVER_BIN ? { natsServerBin: config.NATS_SERVER_BIN } : {}),
    ...(config.NATS_NAMESPACE !== undefined ? { namespace: config.NATS_NAMESPACE } : {}),
    partitions: config.LANE_PARTITIONS,
    basePort: config.PORT,
    logLevel: config.LOG_LEVEL,
    env: process.env,
    ...(dev ? { apps: [] } : config.ONE_PROCESS ? { oneProcess: true } : {}),
    seed: true,
    inboxDemo: true,
    onLine: (source, line) => process.stdout.write(formatLine(source, line)),
  });
} catch (error) {
  process.stderr.write(`\nnotify could not start: ${(error as Error).message}\n`);
  process.exit(1);
}

if (dev) writeDevEnv(config.DATA_DIR, stack, process.env);
process.stdout.write(banner(stack, config.DATA_DIR));

const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  process.stdout.write("\nstopping...\n");
  // Under turbo the apps got the same Ctrl-C: the database stays until they have drained.
  if (dev) await appsStopped(stack, 15_000);
  await stack.stop();
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
process.on("SIGHUP", shutdown);
// With the four apps in one process, that one process is each app's.
for (const proc of new Set(stack.apps.values())) {
  void proc.exited.then((code) => {
    if (!stopping) {
      process.stderr.write(`${proc.name} exited unexpectedly (code ${code}); stopping\n`);
      void shutdown();
    }
  });
}
