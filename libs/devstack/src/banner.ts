import { join, relative } from "node:path";
import { SAMPLE_NOTIFICATION, type Stack } from "./stack.js";
import { stackEnvFile } from "./state.js";

const LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };

/** One log line of an app (pino JSON) as a person reads it: `[ingest   ] 12:00:00.000 info  msg {...}`. */
export function formatLine(source: string, line: string): string {
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
  return `[${source.padEnd(9)}] ${text}\n`;
}

/** What `npm start` and `turbo dev` print once the stack is up: every command a newcomer needs. */
export function banner(stack: Stack, dataDir: string): string {
  const here = (path: string) => {
    const rel = relative(process.cwd(), path);
    return rel.startsWith("..") ? path : rel;
  };
  const key = stack.apiKey ?? "<your API key>";
  const body = JSON.stringify(SAMPLE_NOTIFICATION);
  const provider = (channel: "email" | "sms" | "push", url: string, extra = "") => {
    const name = stack.providers[channel];
    if (name === "sandbox") return `sandbox    curl -sS ${extra}${url}/sandbox/messages`;
    return name === "off" ? "off (your settings)" : `${name} (the real provider, from your settings)`;
  };
  // The SMTP sandbox takes the email the first provider cannot (a SendGrid outage).
  const failover =
    stack.appEnv.EMAIL_FAILOVER_PROVIDER === "sandbox"
      ? `\n         failover   curl -sS ${stack.sandboxes.smtp}/sandbox/messages   (the SMTP sandbox)`
      : "";
  // The operator console is on ingest's operator port unless the settings turn it off.
  const consoleOff = ["false", "0"].includes(stack.appEnv.CONSOLE_ENABLED ?? "");
  const consoleLine = consoleOff
    ? ""
    : `  Console:    ${stack.adminUrl}/console   (operator console: sign in with the dev key)\n`;
  // The inbox demo: a product page with user-123's inbox and preferences, live.
  const demoLine = stack.inboxDemoUrl
    ? `  Inbox demo: ${stack.inboxDemoUrl}   (user-123's inbox and preferences in a product page: send the curl below, watch it arrive)\n`
    : "";
  return `
notify is running.
  API:        ${stack.baseUrl}/api/v1   (API docs: ${stack.baseUrl}/api/v1/docs; readiness and metrics: ${stack.adminUrl}/readyz, /metrics)
${consoleLine}${demoLine}  Postgres:   ${stack.embedded.postgres ? `embedded PostgreSQL, data in ${here(join(dataDir, "postgres"))}` : "DATABASE_URL"}
  NATS:       ${stack.embedded.nats ? `own nats-server at ${stack.natsUrl}, store in ${here(join(dataDir, "nats"))}` : `NATS_URL, namespace "${stack.namespace}"`}
  Dev key:    ${key}   (operator scope; kept in ${here(join(dataDir, "dev-api-key"))})

Channels (and what each provider received):
  email  ${provider("email", stack.sandboxes.sendgrid)}${failover}
  sms    ${provider("sms", stack.sandboxes.plivo)}
  push   ${provider("push", stack.sandboxes.push, `--cacert ${here(stack.pushCaFile)} `)}
  in_app our own inbox (below${stack.inboxDemoUrl ? `, and live in ${stack.inboxDemoUrl}` : ""})

Send a notification on all four channels:
  curl -sS -X POST ${stack.baseUrl}/api/v1/notifications \\
    -H 'Authorization: Bearer ${key}' \\
    -H "Idempotency-Key: $(node -e 'console.log(crypto.randomUUID())')" \\
    -H 'Content-Type: application/json' \\
    -d '${body}'

Its status (the notification_id from the answer):
  curl -sS ${stack.baseUrl}/api/v1/notifications/<notification_id> -H 'Authorization: Bearer ${key}'

The user's in-app inbox: mint a token for user-123, then list it, or stream it (SSE):
  TOKEN=$(curl -sS -X POST ${stack.baseUrl}/api/v1/users/user-123/inbox-tokens -H 'Authorization: Bearer ${key}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).token')
  curl -sS ${stack.baseUrl}/api/v1/inbox -H "X-Inbox-Token: $TOKEN"
  curl -sS -N ${stack.baseUrl}/api/v1/inbox/stream -H "X-Inbox-Token: $TOKEN"

Hear what happens to every notification: register the local receiver as a webhook endpoint,
give it the signing secret, send a notification again, and list what it received (verified):
  SECRET=$(curl -sS -X POST ${stack.baseUrl}/api/v1/webhook-endpoints -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '{"url":"${stack.sandboxes.webhooks}/hooks/dev"}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).secret')
  curl -sS -X PUT ${stack.sandboxes.webhooks}/sandbox/secrets/dev -H 'Content-Type: application/json' -d '{"secrets":["'"$SECRET"'"]}'
  curl -sS ${stack.sandboxes.webhooks}/sandbox/received

The notify CLI (it reads ${here(stackEnvFile(dataDir))}):
  npx notify dlq list      npx notify keys list      npx notify help

Ctrl-C stops everything.
`;
}
