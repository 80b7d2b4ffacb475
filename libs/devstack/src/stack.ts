import { createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import { hashKey } from "@notify/core";
import {
  createDb,
  type DeviceToken,
  findActiveKeyByHash,
  runMigrations,
  seedApiKey,
  seedContact,
  seedDeviceTokens,
  seedTemplate,
} from "@notify/db";
import { generateVapidKeys } from "@notify/providers";
import type { InfraReady, InfraRequest } from "./infra-cli.js";
import { tcpAnswers } from "./nats-server.js";
import { APPS, type AppName, ROOT, STANDALONE } from "./paths.js";
import { isProcessOf, parentAlive, processAlive, readPidFile } from "./pids.js";
import { type AppProcess, spawnApp, spawnHelper, stopChild } from "./processes.js";
import { createSandboxTls } from "./sandboxes/certificates.js";
import {
  claimFixedPort,
  loadState,
  rememberedPort,
  removeStackEnv,
  type StackState,
  saveState,
  sharedNamespace,
  storedSecret,
  writeStackEnv,
} from "./state.js";

export interface StackOptions {
  /** Folder for the stack's own data (Postgres cluster, nats-server store, sandboxes, dev key). */
  dataDir: string;
  /** Postgres to use; when unset, the embedded PostgreSQL under dataDir is started. */
  databaseUrl?: string;
  /** NATS to use (under a namespace of this data folder's own); when unset, the stack runs its own nats-server. */
  natsUrl?: string;
  natsServerBin?: string;
  /** Prefix of streams, subjects and buckets; by default none on the stack's own server, one per data folder on a shared one. */
  namespace?: string;
  partitions?: number;
  /**
   * Port of ingest; the others follow (processor +1, workers +2, receipts +3, the SendGrid
   * sandbox +10, the Plivo sandbox +11, the push sandbox +12, the SMTP sandbox +13 and its
   * HTTP control routes +14, the webhook receiver +15, the inbox demo page +16). 0: every port is picked free on first
   * start and kept for the next ones.
   */
  basePort: number;
  /** Explicit ports (tests pick free ones); unset apps follow basePort, unset sandboxes pick a free port. */
  ports?: Partial<Record<AppName | SandboxName | AdminName, number>>;
  logLevel?: string;
  /**
   * The user's environment (the shell's and `.env`): passed to every app, so any setting reaches
   * it. A channel given real provider credentials here uses the real provider; the others use
   * their sandboxes.
   */
  env?: Record<string, string | undefined>;
  /** Settings of one app only, over the others (e.g. its own NATS user). */
  appSettings?: Partial<Record<AppName, Record<string, string>>>;
  /** Apps to run (default: all four). */
  apps?: readonly AppName[];
  /**
   * Run the four apps in one process (apps/standalone) instead of one process each; `apps` and
   * `appSettings` do not apply then.
   */
  oneProcess?: boolean;
  onLine?: (source: string, line: string) => void;
  /**
   * Node.js options for every app process, after the apps' own (APP_NODE_OPTIONS): a bench's
   * profiler flags (`--perf-basic-prof-only-functions`, `--trace-opt`), which NODE_OPTIONS refuses.
   */
  nodeOptions?: readonly string[];
  /** Create the development key, sample template and sample user when missing. */
  seed?: boolean;
  /**
   * Serve the inbox demo page (inbox-demo-cli: a product page embedding @notify/inbox-elements for
   * the sample user, its tokens minted with the development key) once the apps are up; needs `seed`.
   */
  inboxDemo?: boolean;
}

/** The development servers beside the apps: the provider sandboxes and the inbox demo page. */
type SandboxName =
  | "sandbox"
  | "plivoSandbox"
  | "pushSandbox"
  | "smtpSandbox"
  | "smtpSandboxHttp"
  | "webhookSandbox"
  | "inboxDemo";
/** The operator's ports of the apps with a public one (health, readiness, metrics). */
type AdminName = "ingestAdmin" | "receiptsAdmin";
const ADMIN_OF: Partial<Record<AppName, AdminName>> = { ingest: "ingestAdmin", receipts: "receiptsAdmin" };
/** Where an app answers /readyz: its operator's port when it has a public one, else its only port. */
const readinessPort = (ports: Record<AppName | SandboxName | AdminName, number>, app: AppName) =>
  ports[ADMIN_OF[app] ?? app];
/**
 * The ports and interface of the four apps in one process (apps/standalone), by the names it
 * reads them under (it reads no PORT, ADMIN_PORT or HOST).
 */
const standalonePorts = (ports: Record<AppName | SandboxName | AdminName, number>, host: string) => ({
  INGEST_HOST: host,
  PROCESSOR_HOST: host,
  WORKERS_HOST: host,
  RECEIPTS_HOST: host,
  INGEST_PORT: String(ports.ingest),
  INGEST_ADMIN_PORT: String(ports.ingestAdmin),
  PROCESSOR_PORT: String(ports.processor),
  WORKERS_PORT: String(ports.workers),
  RECEIPTS_PORT: String(ports.receipts),
  RECEIPTS_ADMIN_PORT: String(ports.receiptsAdmin),
});
const CHANNELS = ["email", "sms", "push"] as const;
type ProviderChannel = (typeof CHANNELS)[number];
const PROVIDER_SETTING: Record<ProviderChannel, string> = {
  email: "EMAIL_PROVIDER",
  sms: "SMS_PROVIDER",
  push: "PUSH_PROVIDER",
};

export interface Stack {
  baseUrl: string;
  /** The SendGrid sandbox. */
  sandboxUrl: string;
  /**
   * Every provider sandbox; each lists what it received under /sandbox/messages. `smtp` is
   * the SMTP sandbox's HTTP control origin (the relay email fails over to).
   */
  sandboxes: { sendgrid: string; plivo: string; push: string; smtp: string; webhooks: string };
  /** Per channel: the real provider (named) or "sandbox". */
  providers: Record<ProviderChannel, string>;
  /** The PEM file of the push sandbox's CA (`curl --cacert`). */
  pushCaFile: string;
  databaseUrl: string;
  natsUrl: string;
  namespace: string;
  /** Whether Postgres and NATS are the stack's own (embedded) servers. */
  embedded: { postgres: boolean; nats: boolean };
  /** The development API key (plaintext), when seeded. */
  apiKey: string | null;
  apps: Map<AppName, AppProcess>;
  ports: Record<AppName | SandboxName | AdminName, number>;
  /** Ingest's operator port: /readyz and /metrics. */
  adminUrl: string;
  /** The inbox demo page (with `inboxDemo`), else null. */
  inboxDemoUrl: string | null;
  /** The environment every app gets (without its PORT): what `turbo dev` starts the apps with. */
  appEnv: Record<string, string>;
  /**
   * Stops an app (SIGTERM, and SIGKILL after the grace period; or at once with the signal given)
   * unless it already stopped, starts it again with the same settings, and waits until it is ready.
   * With the four apps in one process, that process is the one restarted.
   */
  restartApp(name: AppName, signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

export const SAMPLE_TEMPLATE = {
  id: "welcome",
  params: ["name"],
  variants: [
    {
      channel: "email",
      locale: "en",
      subject: "Welcome, <%= it.name %>!",
      body: "<h1>Hello <%= it.name %></h1><p>Thanks for joining.</p>",
    },
    { channel: "sms", locale: "en", subject: null, body: "Hello <%= it.name %>, thanks for joining." },
    { channel: "push", locale: "en", subject: "Welcome", body: "Hello <%= it.name %>!" },
    { channel: "in_app", locale: "en", subject: "Welcome", body: "Hello <%= it.name %>, thanks for joining." },
  ],
};
/** The notification the start banner's curl sends: the sample user, all four channels. */
export const SAMPLE_NOTIFICATION = {
  user_id: "user-123",
  category: "account",
  template_id: "welcome",
  data: { name: "Ada" },
  priority: "transactional",
  channels: ["email", "sms", "push", "in_app"],
};
export const SAMPLE_USER = { userId: "user-123", email: "user-123@example.com", phone: "+14155550123" };

// Development-only credentials the sandboxes check and the apps are given.
const SANDBOX_SENDGRID_KEY = "SG.sandbox";
const SANDBOX_PLIVO = { authId: "MASANDBOX000000000000", authToken: "plivo-sandbox-token", from: "+14155550100" };
const SANDBOX_SMTP = { user: "notify", password: "smtp-sandbox-password" };

/**
 * The email failover to the SMTP sandbox, for an email channel on its sandbox: unless the user
 * configured a failover of their own, which a sandbox must not quietly replace.
 */
function smtpFailoverEnv(user: Record<string, string | undefined>, smtpPort: number): Record<string, string> {
  if (user.EMAIL_FAILOVER_PROVIDER !== undefined || user.SMTP_URL !== undefined) return {};
  return {
    EMAIL_FAILOVER_PROVIDER: "sandbox",
    SMTP_URL: `smtp://${SANDBOX_SMTP.user}:${SANDBOX_SMTP.password}@127.0.0.1:${smtpPort}`,
  };
}

/**
 * Which channels the user gave real provider credentials: those use the real provider, every
 * other one its sandbox. An explicit *_PROVIDER setting wins.
 */
export function realProviders(env: Record<string, string | undefined>): Record<ProviderChannel, string | null> {
  const pick = (setting: string | undefined, real: string, configured: boolean) =>
    setting === real || (setting === undefined && configured) ? real : setting === "off" ? "off" : null;
  return {
    email: pick(env.EMAIL_PROVIDER, "sendgrid", env.SENDGRID_API_KEY !== undefined),
    sms: pick(env.SMS_PROVIDER, "plivo", env.PLIVO_AUTH_ID !== undefined && env.PLIVO_AUTH_TOKEN !== undefined),
    push: pick(env.PUSH_PROVIDER, "webpush", env.VAPID_PRIVATE_KEY !== undefined),
  };
}

/**
 * The environment of every app: the stack's defaults, then the user's own settings (shell and
 * .env) over them, then the sandbox settings of each channel the user gave no real provider,
 * then what the stack decided (where Postgres and NATS are).
 */
export function appEnvironment(input: {
  user: Record<string, string | undefined>;
  defaults: Record<string, string>;
  sandboxes: Record<ProviderChannel, Record<string, string>>;
  decided: Record<string, string>;
}): Record<string, string> {
  const real = realProviders(input.user);
  const user = Object.fromEntries(
    Object.entries(input.user).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  const sandboxes = CHANNELS.filter((channel) => real[channel] === null).map((channel) => input.sandboxes[channel]);
  // The workers leave a channel off unless told which provider: credentials alone say "real".
  const chosen = CHANNELS.flatMap((channel) => {
    const name = real[channel];
    return name !== null && name !== "off" ? [{ [PROVIDER_SETTING[channel]]: name }] : [];
  });
  return Object.assign({}, input.defaults, user, ...chosen, ...sandboxes, input.decided);
}

/**
 * Brings the whole service up on one machine: Postgres (the given one, or the embedded
 * PostgreSQL), NATS (the given one, or the stack's own nats-server), migrations, the provider
 * sandboxes, the four apps, and, with `seed`, a development key, a sample template and a user.
 */
export async function startStack(options: StackOptions): Promise<Stack> {
  mkdirSync(options.dataDir, { recursive: true });
  lockDataDir(options.dataDir);
  const state = loadState(options.dataDir);
  const cleanups: Array<() => Promise<unknown>> = [];
  const stopAll = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    cleanups.length = 0;
  };
  cleanups.push(async () => rmSync(join(options.dataDir, "stack.pid"), { force: true }));
  const onLine = options.onLine ?? (() => {});
  try {
    const ports = await choosePorts(options, state);
    const infra = await startInfra(
      {
        dataDir: options.dataDir,
        ...(options.databaseUrl ? {} : { postgresPort: await rememberedPort(state, "postgres") }),
        ...(options.natsUrl ? {} : { natsPort: await rememberedPort(state, "nats") }),
        ...(options.natsServerBin ? { natsServerBin: options.natsServerBin } : {}),
      },
      onLine,
    );
    if (infra) cleanups.push(() => infra.stop());
    const databaseUrl = options.databaseUrl ?? (infra?.ready.databaseUrl as string);
    const natsUrl = options.natsUrl ?? (infra?.ready.natsUrl as string);
    if (options.natsUrl) await requireNats(options.natsUrl);
    const namespace = options.namespace ?? (options.natsUrl ? sharedNamespace(state) : "");
    saveState(options.dataDir, state);

    await runMigrations(databaseUrl);
    let apiKey: string | null = null;
    if (options.seed) apiKey = await seedDevelopment(databaseUrl, options.dataDir);

    const userEnv = options.env ?? {};
    const real = realProviders(userEnv);
    const receiptsUrl = `http://127.0.0.1:${ports.receipts}`;
    const sandboxes = await startSandboxes(options.dataDir, ports, receiptsUrl, onLine);
    cleanups.push(() => sandboxes.stop());
    const { sendgrid, plivo, push, smtp, webhooks, vapid, caFile } = sandboxes;
    // The sample user's browser: subscribed once; the sandbox's journal keeps it across restarts.
    if (options.seed && real.push === null && !state.sampleSubscription?.startsWith(`${push.url}/`)) {
      const { id: _id, ...subscription } = await pushSubscribe(push.url, caFile);
      await seedPushSubscription(databaseUrl, subscription);
      state.sampleSubscription = subscription.endpoint;
      saveState(options.dataDir, state);
    }

    const sandboxEnv: Record<ProviderChannel, Record<string, string>> = {
      email: {
        EMAIL_PROVIDER: "sandbox",
        SENDGRID_API_KEY: SANDBOX_SENDGRID_KEY,
        SENDGRID_BASE_URL: sendgrid.url,
        SENDGRID_WEBHOOK_PUBLIC_KEY: sendgrid.webhookPublicKey,
        ...smtpFailoverEnv(userEnv, smtp.smtpPort),
      },
      sms: {
        SMS_PROVIDER: "sandbox",
        PLIVO_AUTH_ID: SANDBOX_PLIVO.authId,
        PLIVO_AUTH_TOKEN: SANDBOX_PLIVO.authToken,
        PLIVO_BASE_URL: plivo.url,
        SMS_FROM: SANDBOX_PLIVO.from,
        PLIVO_REPORT_URL: `${receiptsUrl}/webhooks/plivo`,
      },
      push: {
        PUSH_PROVIDER: "sandbox",
        VAPID_SUBJECT: "mailto:dev@notify.localhost",
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOWED_HOSTS: "127.0.0.1,localhost",
        PUSH_ALLOW_PRIVATE_NETWORKS: "true",
        PUSH_CA_FILE: caFile,
      },
    };
    const common = appEnvironment({
      user: userEnv,
      defaults: {
        LANE_PARTITIONS: String(options.partitions ?? 16),
        LOG_LEVEL: options.logLevel ?? "info",
        HOST: "127.0.0.1",
        // A stack on one machine: push subscriptions may point at the push sandbox on 127.0.0.1.
        NOTIFY_PROFILE: "development",
        ARCHIVE_DIR: join(options.dataDir, "archive"),
        // Ingest refuses to start without it; kept in the data folder so cursors survive restarts.
        CURSOR_SECRET: userEnv.CURSOR_SECRET ?? storedSecret(options.dataDir, "cursor-secret"),
        // The unsubscribe links in email point at this stack's ingest, whatever its port.
        UNSUBSCRIBE_BASE_URL: `http://127.0.0.1:${ports.ingest}`,
      },
      sandboxes: sandboxEnv,
      decided: { DATABASE_URL: databaseUrl, NATS_URL: natsUrl, NATS_NAMESPACE: namespace },
    });
    const apps = new Map<AppName, AppProcess>();
    const spawnOne = (name: AppName) => {
      const admin = ADMIN_OF[name];
      const env = {
        ...common,
        ...options.appSettings?.[name],
        PORT: String(ports[name]),
        ...(admin ? { ADMIN_PORT: String(ports[admin]) } : {}),
      };
      const proc = spawnApp(name, env, onLine, options.nodeOptions);
      apps.set(name, proc);
      return proc;
    };
    const ready = (proc: AppProcess, name: AppName) =>
      proc.ready(`http://127.0.0.1:${readinessPort(ports, name)}/readyz`, 60_000);
    // The four apps in one process: each still answers readiness on its own port.
    const spawnStandalone = async () => {
      const proc = spawnApp(
        STANDALONE,
        { ...common, ...standalonePorts(ports, common.HOST ?? "127.0.0.1") },
        onLine,
        options.nodeOptions,
      );
      for (const name of APPS) apps.set(name, proc);
      await Promise.all(APPS.map((name) => ready(proc, name)));
    };
    if (options.oneProcess) {
      cleanups.push(async () => apps.get("ingest")?.stop());
      await spawnStandalone();
    } else {
      for (const name of options.apps ?? APPS) {
        spawnOne(name);
        cleanups.push(async () => apps.get(name)?.stop());
      }
      await Promise.all([...apps].map(([name, proc]) => ready(proc, name)));
    }
    const baseUrl = `http://127.0.0.1:${ports.ingest}`;
    let inboxDemoUrl: string | null = null;
    if (options.inboxDemo && apiKey !== null) {
      const demo = await startDemo({
        port: ports.inboxDemo,
        // Loopback whatever HOST says: the page mints the development user's tokens for anyone who asks.
        host: "127.0.0.1",
        apiUrl: baseUrl,
        apiKey,
        onLine,
      });
      cleanups.push(() => demo.stop());
      inboxDemoUrl = demo.url;
    }
    writeStackEnv(options.dataDir, {
      DATABASE_URL: databaseUrl,
      NATS_URL: natsUrl,
      NATS_NAMESPACE: namespace,
      LANE_PARTITIONS: common.LANE_PARTITIONS as string,
      NOTIFY_BASE_URL: baseUrl,
      SENDGRID_SANDBOX_URL: sendgrid.url,
      PLIVO_SANDBOX_URL: plivo.url,
      PUSH_SANDBOX_URL: push.url,
      PUSH_SANDBOX_CA: caFile,
      SMTP_SANDBOX_URL: smtp.url,
      WEBHOOK_SANDBOX_URL: webhooks.url,
    });
    cleanups.unshift(async () => removeStackEnv(options.dataDir));
    return {
      baseUrl,
      adminUrl: `http://127.0.0.1:${ports.ingestAdmin}`,
      inboxDemoUrl,
      sandboxUrl: sendgrid.url,
      sandboxes: { sendgrid: sendgrid.url, plivo: plivo.url, push: push.url, smtp: smtp.url, webhooks: webhooks.url },
      providers: {
        email: real.email ?? "sandbox",
        sms: real.sms ?? "sandbox",
        push: real.push ?? "sandbox",
      },
      pushCaFile: caFile,
      databaseUrl,
      natsUrl,
      namespace,
      embedded: { postgres: !options.databaseUrl, nats: !options.natsUrl },
      apiKey,
      apps,
      ports: {
        ...ports,
        plivoSandbox: plivo.port,
        pushSandbox: push.port,
        smtpSandbox: smtp.smtpPort,
        smtpSandboxHttp: smtp.port,
        webhookSandbox: webhooks.port,
      },
      appEnv: common,
      async restartApp(name, signal = "SIGTERM") {
        const old = apps.get(name);
        if (old && old.child.exitCode === null && old.child.signalCode === null) {
          if (signal === "SIGTERM") await old.stop();
          else {
            old.child.kill(signal);
            await old.exited;
          }
        }
        if (options.oneProcess) await spawnStandalone();
        else await ready(spawnOne(name), name);
      },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

interface Sandboxes {
  sendgrid: { url: string; port: number; webhookPublicKey: string };
  plivo: { url: string; port: number };
  push: { url: string; port: number };
  /** The HTTP control routes (url, port) and the SMTP port. */
  smtp: { url: string; port: number; smtpPort: number };
  /** The webhook receiver: endpoints at /hooks/{name}. */
  webhooks: { url: string; port: number };
  vapid: { publicKey: string; privateKey: string };
  caFile: string;
  stop(): Promise<void>;
}

const SANDBOX_ENTRY = join(ROOT, "libs", "devstack", "dist", "sandbox-cli.js");

/**
 * The provider sandboxes (libs/devstack sandbox-cli) in a process of their own, with their keys,
 * certificate and journals under `<dataDir>/sandbox`, so that what they received, their push
 * subscriptions and their unanswered receipts survive a restart.
 */
async function startSandboxes(
  dataDir: string,
  ports: Record<SandboxName, number>,
  receiptsUrl: string,
  onLine: (source: string, line: string) => void,
): Promise<Sandboxes> {
  const dir = join(dataDir, "sandbox");
  mkdirSync(dir, { recursive: true });
  const webhookKey = storedSecret(dir, "sendgrid-webhook-key.pem", () =>
    generateKeyPairSync("ec", { namedCurve: "prime256v1" })
      .privateKey.export({ format: "pem", type: "pkcs8" })
      .toString(),
  );
  const webhookPublicKey = createPublicKey(createPrivateKey(`${webhookKey}\n`))
    .export({ format: "der", type: "spki" })
    .toString("base64");
  const vapid = JSON.parse(storedSecret(dir, "vapid.json", () => JSON.stringify(generateVapidKeys()))) as {
    publicKey: string;
    privateKey: string;
  };
  storedSecret(dir, "push-tls.json", () => JSON.stringify(createSandboxTls()));
  const caFile = join(dataDir, "push-sandbox-ca.pem");
  const { ready, child, exited } = await spawnHelper<Record<string, string>>({
    entry: SANDBOX_ENTRY,
    source: "sandboxes",
    onLine,
    env: {
      PATH: process.env.PATH ?? "",
      HOST: "127.0.0.1",
      PORT: String(ports.sandbox),
      SANDBOX_API_KEY: SANDBOX_SENDGRID_KEY,
      SANDBOX_EVENT_WEBHOOK_URL: `${receiptsUrl}/webhooks/sendgrid`,
      SANDBOX_WEBHOOK_PRIVATE_KEY: `${webhookKey}\n`,
      PLIVO_SANDBOX_PORT: String(ports.plivoSandbox),
      PLIVO_AUTH_ID: SANDBOX_PLIVO.authId,
      PLIVO_AUTH_TOKEN: SANDBOX_PLIVO.authToken,
      PLIVO_SANDBOX_INBOUND_URL: `${receiptsUrl}/webhooks/plivo/inbound`,
      PUSH_SANDBOX_PORT: String(ports.pushSandbox),
      VAPID_PUBLIC_KEY: vapid.publicKey,
      PUSH_TLS_FILE: join(dir, "push-tls.json"),
      PUSH_CA_FILE: caFile,
      SMTP_SANDBOX_PORT: String(ports.smtpSandbox),
      SMTP_SANDBOX_HTTP_PORT: String(ports.smtpSandboxHttp),
      SMTP_SANDBOX_USER: SANDBOX_SMTP.user,
      SMTP_SANDBOX_PASSWORD: SANDBOX_SMTP.password,
      SANDBOX_JOURNAL_DIR: dir,
      WEBHOOK_SANDBOX_PORT: String(ports.webhookSandbox),
    },
  });
  const at = (url: string | undefined) => ({ url: url as string, port: Number(new URL(url as string).port) });
  return {
    sendgrid: { ...at(ready.sendgrid), webhookPublicKey },
    plivo: at(ready.plivo),
    push: at(ready.push),
    smtp: { ...at(ready.smtp), smtpPort: at(ready.smtpRelay).port },
    webhooks: at(ready.webhooks),
    vapid,
    caFile,
    stop: () => stopChild(child, exited, () => child.kill("SIGTERM"), 10_000),
  };
}

const DEMO_ENTRY = join(ROOT, "libs", "devstack", "dist", "inbox-demo-cli.js");

/**
 * The inbox demo page (libs/devstack inbox-demo-cli) in a process of its own: the development
 * key goes to it in its environment, and only inbox tokens leave it.
 */
async function startDemo(input: {
  port: number;
  host: string;
  apiUrl: string;
  apiKey: string;
  onLine: (source: string, line: string) => void;
}): Promise<{ url: string; stop(): Promise<void> }> {
  const { ready, child, exited } = await spawnHelper<{ url: string }>({
    entry: DEMO_ENTRY,
    source: "demo",
    onLine: input.onLine,
    env: {
      PATH: process.env.PATH ?? "",
      HOST: input.host,
      PORT: String(input.port),
      NOTIFY_BASE_URL: input.apiUrl,
      NOTIFY_API_KEY: input.apiKey,
      INBOX_DEMO_USER: SAMPLE_USER.userId,
      INBOX_DEMO_NOTIFICATION: JSON.stringify(SAMPLE_NOTIFICATION),
    },
  });
  return { url: ready.url, stop: () => stopChild(child, exited, () => child.kill("SIGTERM"), 5000) };
}

/** A browser's push subscription, made at the push sandbox (which keeps its private keys). */
function pushSubscribe(origin: string, caFile: string): Promise<DeviceToken & { id: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${origin}/sandbox/subscriptions`, { method: "POST", ca: readFileSync(caFile) }, (res) => {
      let body = "";
      res.on("data", (chunk) => {
        body += chunk;
      });
      res.on("end", () => {
        try {
          resolve(JSON.parse(body) as DeviceToken & { id: string });
        } catch (error) {
          reject(error);
        }
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * One stack per data folder (its cluster, store, sandbox journals and remembered ports): the
 * folder holds the pid of the process running it, and a second one refuses to start.
 */
function lockDataDir(dataDir: string): void {
  const file = join(dataDir, "stack.pid");
  const holder = readPidFile(file);
  if (holder !== null && holder !== process.pid && processAlive(holder) && isProcessOf(holder, "node", "")) {
    throw new Error(
      `another notify stack is running on ${dataDir} (pid ${holder}); stop it first, or set DATA_DIR to another folder`,
    );
  }
  writeFileSync(file, `${process.pid}\n`);
}

/**
 * The ports of the apps and sandboxes. Given explicitly, or from basePort (claimed, so that no
 * other process's freePort hands one of them out before the stack listens); with basePort 0,
 * remembered from the last start (the push subscriptions and queued work point at the sandboxes).
 */
export async function choosePorts(
  options: StackOptions,
  state: StackState,
): Promise<Record<AppName | SandboxName | AdminName, number>> {
  const offsets: Record<AppName | SandboxName | AdminName, number> = {
    ingest: 0,
    processor: 1,
    workers: 2,
    receipts: 3,
    sandbox: 10,
    plivoSandbox: 11,
    pushSandbox: 12,
    smtpSandbox: 13,
    smtpSandboxHttp: 14,
    webhookSandbox: 15,
    inboxDemo: 16,
    ingestAdmin: 100,
    receiptsAdmin: 103,
  };
  const ports = {} as Record<AppName | SandboxName | AdminName, number>;
  for (const [name, offset] of Object.entries(offsets) as Array<[AppName | SandboxName | AdminName, number]>) {
    const explicit = options.ports?.[name];
    if (explicit !== undefined) ports[name] = explicit;
    // Tests that pick their ports leave the sandboxes they do not name on free ones.
    else if (options.ports || options.basePort === 0) ports[name] = await rememberedPort(state, name);
    else {
      ports[name] = options.basePort + offset;
      claimFixedPort(ports[name]);
    }
  }
  return ports;
}

async function requireNats(url: string): Promise<void> {
  const first = new URL((url.split(",")[0] as string).trim());
  if (!(await tcpAnswers(first.hostname || "127.0.0.1", Number(first.port || 4222), 2000))) {
    throw new Error(`nothing answers at NATS_URL (${url}); start that server, or unset NATS_URL to run one here`);
  }
}

interface Infra {
  ready: InfraReady;
  stop(): Promise<void>;
}

const INFRA_ENTRY = join(ROOT, "libs", "devstack", "dist", "infra-cli.js");

/**
 * Starts the supervisor of the embedded Postgres and nats-server (libs/devstack infra-cli) in a
 * process group of its own, after stopping one that an earlier, killed run left behind.
 */
async function startInfra(
  request: InfraRequest,
  onLine: (source: string, line: string) => void,
): Promise<Infra | null> {
  if (request.postgresPort === undefined && request.natsPort === undefined) return null;
  // A supervisor outlives its parent only while it stops its servers: it is waited for. One
  // whose parent lives belongs to a stack still running on this folder.
  const pidFile = join(request.dataDir, "infra.pid");
  for (let waited = 0; ; waited += 100) {
    const earlier = readPidFile(pidFile);
    if (earlier === null || !processAlive(earlier) || !isProcessOf(earlier, "node", "infra-cli")) break;
    if (waited >= 30_000 || parentAlive(earlier)) {
      throw new Error(
        `another notify stack is running on ${request.dataDir} (supervisor pid ${earlier}); stop it first, or set DATA_DIR to another folder`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const { ready, child, exited } = await spawnHelper<InfraReady>({
    entry: INFRA_ENTRY,
    args: [JSON.stringify(request)],
    detached: true,
    // It stops its servers itself once its parent is gone (up to a minute for PostgreSQL).
    orphaned: { graceMs: 60_000, stage: 1 },
    source: "stack",
    onLine,
  });
  return {
    ready,
    stop: () => stopChild(child, exited, () => (child.connected ? child.send("stop") : child.kill("SIGTERM")), 60_000),
  };
}

/**
 * The development key is kept in plaintext in the data folder (development only) so that the
 * printed curl keeps working across restarts; only its hash is in the database.
 */
export async function seedDevelopment(databaseUrl: string, dataDir: string): Promise<string> {
  const database = createDb({ url: databaseUrl, max: 1 });
  try {
    const keyFile = join(dataDir, "dev-api-key");
    let key = existsSync(keyFile) ? readFileSync(keyFile, "utf8").trim() : "";
    const known = key ? await findActiveKeyByHash(database, hashKey(key)) : null;
    // A key in a rotation's grace period is on its way out, and one without the operator scope
    // (from before it existed) cannot open the console: the stack issues a new one.
    if (known === null || known.revoked_at !== null || !known.scopes.includes("operator")) {
      key = await seedApiKey(database, { clientId: "dev", name: "development key", scopes: ["operator"] });
      writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
    }
    await seedTemplate(database, SAMPLE_TEMPLATE);
    await seedContact(database, SAMPLE_USER);
    return key;
  } finally {
    await database.close();
  }
}

async function seedPushSubscription(databaseUrl: string, subscription: DeviceToken): Promise<void> {
  const database = createDb({ url: databaseUrl, max: 1 });
  try {
    await seedDeviceTokens(database, SAMPLE_USER.userId, [subscription]);
  } finally {
    await database.close();
  }
}
