import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { guardChild, isProcessOf, processAlive, ROOT, readPidFile } from "@notify/devstack/local";
import postgres from "postgres";

// The embedded default as a user runs it (`npm start` in a shell), for the tests and the soak
// run that hold it to its promises.

/**
 * `npm start` as a newcomer runs it, in a process group of its own so that a test can kill the
 * whole stack at once (and so that the group is stopped when the test process ends, however it
 * ends). Only PATH and HOME come from the test's environment: no DATABASE_URL, no NATS_URL,
 * nothing a developer's shell might hold.
 */
export interface StartedStack {
  child: ChildProcess;
  output: string[];
  /** Resolves once the banner says it is running; rejects if it exits first. */
  running: Promise<void>;
  exited: Promise<number | null>;
}

export function npmStart(dataDir: string, env: Record<string, string> = {}): StartedStack {
  const child = spawn("npm", ["start", "--silent"], {
    cwd: ROOT,
    detached: true,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: dataDir, PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // npm start stops its stack on SIGTERM (the embedded servers' supervisor, in a group of its
  // own, once npm start is gone).
  guardChild(child, { marker: "npm", group: true, signal: "SIGTERM", graceMs: 30_000, stage: 0 });
  const output: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const running = new Promise<void>((resolve, reject) => {
    let buffer = "";
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      output.push(...lines);
      if (lines.some((line) => line.startsWith("notify is running."))) resolve();
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    void exited.then((code) => reject(new Error(`npm start exited (${code}):\n${output.slice(-40).join("\n")}`)));
  });
  running.catch(() => {});
  return { child, output, running, exited };
}

/**
 * Kills everything the stack runs with SIGKILL at once, as a power cut would: npm start, the
 * apps and sandboxes (its process group) and the embedded Postgres and nats-server with their
 * supervisor (a group of their own).
 */
export function killEverything(dataDir: string, stack: StartedStack): void {
  const pids = [
    readPidFile(join(dataDir, "postgres", "postmaster.pid")),
    readPidFile(join(dataDir, "nats", "nats-server.pid")),
    readPidFile(join(dataDir, "infra.pid")),
  ].filter((pid): pid is number => pid !== null && processAlive(pid));
  try {
    process.kill(-(stack.child.pid as number), "SIGKILL");
  } catch {}
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}

/** Whether the embedded servers of this data folder are still running. */
export function serversAlive(dataDir: string): boolean {
  const postgres = readPidFile(join(dataDir, "postgres", "postmaster.pid"));
  const nats = readPidFile(join(dataDir, "nats", "nats-server.pid"));
  return (
    (postgres !== null && isProcessOf(postgres, "postgres", dataDir)) ||
    (nats !== null && isProcessOf(nats, "nats-server", dataDir))
  );
}

/** The running stack's settings, as the CLI reads them. */
export function stackEnv(dataDir: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of readFileSync(join(dataDir, "stack.env"), "utf8").split("\n")) {
    const match = /^([A-Z_]+)=(.*)$/.exec(line);
    if (match?.[1] && match[2] !== undefined) values[match[1]] = JSON.parse(match[2]) as string;
  }
  return values;
}

export const devKey = (dataDir: string) => readFileSync(join(dataDir, "dev-api-key"), "utf8").trim();

/** GET over HTTPS trusting one CA (the push sandbox's), as `curl --cacert` does. */
export function getWithCa(url: string, ca: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    request(url, { ca }, (res) => {
      let body = "";
      res.on("data", (chunk) => {
        body += chunk;
      });
      res.on("end", () => {
        try {
          resolve(JSON.parse(body));
        } catch (error) {
          reject(error);
        }
      });
    })
      .on("error", reject)
      .end();
  });
}

/**
 * POSTs a notification as an upstream service should: one idempotency key for the request, kept
 * across retries of a 503, a 409 (the first try is still in flight) or a dropped connection until
 * `deadlineMs` has passed, each after the Retry-After asked for (a request whose publish was
 * ambiguous is then a replay, never a second notification). Answers its id. Given several ingest
 * instances, each retry goes to the next, as a load balancer would move off a dead one.
 */
export async function postNotification(
  baseUrl: string | readonly string[],
  apiKey: string,
  body: unknown,
  options: { idempotencyKey?: string; deadlineMs?: number } = {},
): Promise<string> {
  const idempotencyKey = options.idempotencyKey ?? randomUUID();
  const deadline = Date.now() + (options.deadlineMs ?? 10_000);
  const urls = typeof baseUrl === "string" ? [baseUrl] : baseUrl;
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(`${urls[attempt % urls.length]}/api/v1/notifications`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
        "idempotency-key": idempotencyKey,
      },
      body: JSON.stringify(body),
    }).catch(() => null);
    const text = response === null ? "" : await response.text().catch(() => "");
    if (response?.status === 202 || response?.status === 200) {
      const answer = JSON.parse(text) as { notification_id?: string };
      if (answer.notification_id) return answer.notification_id;
    }
    if ((response !== null && response.status !== 503 && response.status !== 409) || Date.now() > deadline) {
      throw new Error(`POST answered ${response?.status ?? "nothing"}: ${text}`);
    }
    const retryAfterMs = Number(response?.headers.get("retry-after") ?? 0) * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.min(Math.max(250, retryAfterMs), 5000)));
  }
}

/**
 * GETs a JSON document, once more (up to three tries) when the connection drops before an answer:
 * a GET is safe to repeat, and a client reusing an idle keep-alive connection can have it closed
 * under it by a server whose idle timeout ran out while it was busy (ECONNRESET), as any HTTP
 * client must expect. Any answer but 2xx throws.
 */
export async function getJson<T>(url: string, init: RequestInit = {}): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let response: Response;
    try {
      response = await fetch(url, init);
    } catch (error) {
      const code = (error as { cause?: { code?: string } }).cause?.code;
      if (attempt < 3 && (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE")) continue;
      throw error;
    }
    if (!response.ok) throw new Error(`GET ${url} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as T;
  }
}

/** Log lines of the stack at error level or worse (as npm start prints them). */
export const errorLines = (output: string[]) => output.filter((line) => /^\[[a-z ]+\] \S+ (error|fatal)\b/.test(line));

/**
 * How many times the providers received each (notification, channel), keyed
 * `<notification id>:<channel>`: read from the sandboxes' own listings (SendGrid's custom_args,
 * the SMTP sandbox's X-Notification-Id,
 * the Plivo report URL, the decrypted push payload) and, for in-app, from the inbox.
 */
export async function receivedByProviders(dataDir: string): Promise<Map<string, number>> {
  const env = stackEnv(dataDir);
  const received = new Map<string, number>();
  const count = (id: string | null | undefined, channel: string) => {
    if (!id) return;
    const key = `${id}:${channel}`;
    received.set(key, (received.get(key) ?? 0) + 1);
  };
  const sendgrid = await getJson<{ data: Array<{ custom_args: Record<string, string> }> }>(
    `${env.SENDGRID_SANDBOX_URL}/sandbox/messages`,
  );
  for (const mail of sendgrid.data) count(mail.custom_args.notification_id, "email");
  // Email fails over to the SMTP sandbox when SendGrid's cannot take a send: one send across both.
  if (env.SMTP_SANDBOX_URL) {
    const smtp = await getJson<{ data: Array<{ notification_id: string | null }> }>(
      `${env.SMTP_SANDBOX_URL}/sandbox/messages`,
    );
    for (const mail of smtp.data) count(mail.notification_id, "email");
  }
  const plivo = await getJson<{ data: Array<{ url: string | null }> }>(`${env.PLIVO_SANDBOX_URL}/sandbox/messages`);
  for (const sms of plivo.data) count(sms.url ? new URL(sms.url).searchParams.get("notification_id") : null, "sms");
  const push = (await getWithCa(
    `${env.PUSH_SANDBOX_URL}/sandbox/messages`,
    readFileSync(env.PUSH_SANDBOX_CA as string, "utf8"),
  )) as { data: Array<{ payload: string }> };
  for (const message of push.data) {
    count((JSON.parse(message.payload) as { notification_id?: string }).notification_id, "push");
  }
  for (const id of await inboxNotificationIds(env.DATABASE_URL as string)) count(id, "in_app");
  return received;
}

/**
 * PostgreSQL's answers while it cannot take a connection yet: starting up or recovering after a
 * crash (57P03), or not listening at all.
 */
const NOT_READY = new Set(["57P03", "ECONNREFUSED", "ECONNRESET"]);

/**
 * The notification of every inbox item, read from the stack's PostgreSQL. A server the stack's
 * supervisor is (re)starting, or one recovering from a crash, is waited for, up to a minute.
 */
async function inboxNotificationIds(url: string): Promise<string[]> {
  const until = Date.now() + 60_000;
  for (;;) {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      return (await sql<{ notification_id: string }[]>`select notification_id from inbox_items`).map(
        (row) => row.notification_id,
      );
    } catch (error) {
      if (!NOT_READY.has((error as { code?: string }).code ?? "") || Date.now() > until) throw error;
    } finally {
      await sql.end();
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * The lines of the embedded PostgreSQL's log (postgres.log in the data folder) that tell of
 * trouble: errors, crashes, recoveries and restarts, for a failing test to print.
 */
export function serverLogTrouble(dataDir: string): string[] {
  let log: string;
  try {
    log = readFileSync(join(dataDir, "postgres.log"), "utf8");
  } catch {
    return ["(no postgres.log)"];
  }
  return log
    .split("\n")
    .filter((line) => /\b(ERROR|FATAL|PANIC|WARNING)\b|terminated by|recovery|ready to accept|shut down/.test(line));
}

/**
 * Memory (kB) of every process of a running stack, by role: npm start, the sandboxes, each app,
 * the supervisor, nats-server and PostgreSQL (all its processes). The resident set size, and the
 * proportional set size (shared pages, like PostgreSQL's shared buffers, counted once across
 * the processes that share them) where the kernel gives it. Linux only.
 */
export function stackMemory(dataDir: string): Record<string, { rss: number; pss: number }> {
  const memory: Record<string, { rss: number; pss: number }> = {};
  const add = (role: string, kb: { rss: number; pss: number }) => {
    const sum = memory[role] ?? { rss: 0, pss: 0 };
    memory[role] = { rss: sum.rss + kb.rss, pss: sum.pss + kb.pss };
  };
  const postmaster = readPidFile(join(dataDir, "postgres", "postmaster.pid"));
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string;
    let status: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ");
      status = readFileSync(`/proc/${entry}/status`, "utf8");
    } catch {
      continue;
    }
    const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    let pss = rss;
    try {
      pss = Number(/Pss:\s+(\d+)/.exec(readFileSync(`/proc/${entry}/smaps_rollup`, "utf8"))?.[1] ?? rss);
    } catch {}
    const kb = { rss, pss };
    const ppid = Number(/PPid:\s+(\d+)/.exec(status)?.[1] ?? 0);
    const pid = Number(entry);
    const app = /apps\/(ingest|processor|workers|receipts)\/dist\/main\.js/.exec(cmdline)?.[1];
    if (app && cmdline.includes(ROOT)) add(app, kb);
    else if (cmdline.includes("libs/devstack/dist/cli.js")) add("npm start", kb);
    else if (cmdline.includes("libs/devstack/dist/sandbox-cli.js")) add("sandboxes", kb);
    else if (cmdline.includes("infra-cli.js") && cmdline.includes(dataDir)) add("supervisor", kb);
    else if (cmdline.includes("nats-server") && cmdline.includes(dataDir)) add("nats-server", kb);
    else if (postmaster !== null && (pid === postmaster || ppid === postmaster)) add("postgres", kb);
  }
  return memory;
}

export interface NotificationView {
  status: string;
  channels: Record<string, { status: string; reason: string | null }>;
}

/** A notification's view once it has settled (no longer accepted or processing). */
export async function settledView(
  baseUrl: string,
  key: string,
  id: string,
  timeoutMs = 30_000,
): Promise<NotificationView> {
  const deadline = Date.now() + timeoutMs;
  let view: NotificationView | undefined;
  while (Date.now() < deadline) {
    const response = await fetch(`${baseUrl}/api/v1/notifications/${id}`, {
      headers: { authorization: `Bearer ${key}` },
    }).catch(() => null);
    if (response?.ok) {
      view = (await response.json()) as NotificationView;
      if (view.status !== "accepted" && view.status !== "processing") return view;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`notification ${id} still ${view?.status ?? "unknown"} after ${timeoutMs} ms`);
}
