import { join } from "node:path";
import { type ConfigError, int, parseConfig, port } from "@notify/config";
import * as v from "valibot";
import { ROOT } from "./paths.js";
import { startStack } from "./stack.js";

// `npm start`: the whole service on this machine with embedded defaults.
const Config = v.object({
  /** Use this Postgres instead of the embedded PGlite. */
  DATABASE_URL: v.optional(v.pipe(v.string(), v.url("must be a URL"))),
  /** Use the NATS answering here; when none does, a local nats-server is started here. */
  NATS_URL: v.optional(v.string(), "nats://127.0.0.1:4222"),
  NATS_SERVER_BIN: v.optional(v.string()),
  NATS_NAMESPACE: v.optional(v.string(), ""),
  /** Ingest port; processor, workers and receipts take the next three, the sandbox +10. */
  PORT: port(3000),
  PGLITE_PORT: port(5433),
  LANE_PARTITIONS: int(16, 1, 64),
  /** Where embedded data lives (PGlite, nats-server store, the development key). */
  DATA_DIR: v.optional(v.string(), join(ROOT, ".data")),
  LOG_LEVEL: v.optional(v.string(), "info"),
});

let config: v.InferOutput<typeof Config>;
try {
  config = parseConfig(Config, process.env);
} catch (error) {
  process.stderr.write(`${(error as ConfigError).message}\n`);
  process.exit(78);
}

const LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };
const print = (app: string, line: string) => {
  let text = line;
  try {
    const {
      level,
      time,
      msg,
      app: _a,
      name: _n,
      pid: _p,
      hostname: _h,
      ...rest
    } = JSON.parse(line) as Record<string, unknown>;
    const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : "";
    text = `${String(time ?? "").slice(11, 23)} ${(LEVELS[level as number] ?? String(level)).padEnd(5)} ${String(msg)}${extra}`;
  } catch {}
  process.stdout.write(`[${app.padEnd(9)}] ${text}\n`);
};

process.stdout.write("Starting notify: Postgres, NATS, migrations, sandbox and the four apps...\n");
let stack: Awaited<ReturnType<typeof startStack>>;
try {
  stack = await startStack({
    dataDir: config.DATA_DIR,
    databaseUrl: config.DATABASE_URL,
    natsUrl: config.NATS_URL,
    natsServerBin: config.NATS_SERVER_BIN,
    namespace: config.NATS_NAMESPACE,
    partitions: config.LANE_PARTITIONS,
    basePort: config.PORT,
    pglitePort: config.PGLITE_PORT,
    logLevel: config.LOG_LEVEL,
    seed: true,
    onLine: print,
  });
} catch (error) {
  process.stderr.write(`\nnotify could not start: ${(error as Error).message}\n`);
  process.exit(1);
}

const body = JSON.stringify({
  user_id: "user-123",
  category: "account",
  template_id: "welcome",
  data: { name: "Ada" },
  priority: "transactional",
  channels: ["email", "sms", "push", "in_app"],
});
process.stdout.write(`
notify is running.
  API:       ${stack.baseUrl}/api/v1   (health: ${stack.baseUrl}/healthz)
  Postgres:  ${config.DATABASE_URL ? "DATABASE_URL" : "embedded PGlite"}   NATS: ${stack.natsUrl}
  Sandboxes: ${stack.sandboxes.sendgrid}/sandbox/messages   (emails SendGrid received)
             ${stack.sandboxes.plivo}/sandbox/messages   (SMS Plivo received)
             ${stack.sandboxes.push}/sandbox/messages   (Web Push, decrypted; HTTPS under the CA in the data folder)
  Dev key:   ${stack.apiKey}   (admin scope; kept in ${join(config.DATA_DIR, "dev-api-key")})

Send a notification:
  curl -sS -X POST ${stack.baseUrl}/api/v1/notifications \\
    -H 'Authorization: Bearer ${stack.apiKey}' \\
    -H "Idempotency-Key: $(node -e 'console.log(crypto.randomUUID())')" \\
    -H 'Content-Type: application/json' \\
    -d '${body}'

Then read its status (use the notification_id from the answer):
  curl -sS ${stack.baseUrl}/api/v1/notifications/<notification_id> -H 'Authorization: Bearer ${stack.apiKey}'

Ctrl-C stops everything.
`);

let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  process.stdout.write("\nstopping...\n");
  await stack.stop();
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
for (const proc of stack.apps.values()) {
  void proc.exited.then((code) => {
    if (!stopping) {
      process.stderr.write(`${proc.name} exited unexpectedly (code ${code}); stopping\n`);
      void shutdown();
    }
  });
}
