import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hashKey } from "@notify/core";
import { createDb, type DeviceToken, runMigrations, seedApiKey, seedContact, seedTemplate } from "@notify/db";
import { generateVapidKeys, startPlivoSandbox, startPushSandbox, startSendgridSandbox } from "@notify/providers";
import { ensureNats, type LocalNats } from "./nats-server.js";
import { APPS, type AppName } from "./paths.js";
import { type EmbeddedPostgres, startEmbeddedPostgres } from "./pglite.js";
import { type AppProcess, spawnApp, waitReady } from "./processes.js";

export interface StackOptions {
  /** Folder for embedded data (PGlite, nats-server store, the development key). */
  dataDir: string;
  /** Postgres to use; when unset, embedded PGlite is started. */
  databaseUrl?: string;
  /** NATS to use; a local nats-server is started when nothing answers there. */
  natsUrl: string;
  natsServerBin?: string;
  namespace?: string;
  partitions?: number;
  /**
   * Port of ingest; the others follow (processor +1, workers +2, receipts +3, the SendGrid
   * sandbox +10, the Plivo sandbox +11, the push sandbox +12).
   */
  basePort: number;
  pglitePort?: number;
  /** Explicit ports (tests pick free ones); unset apps follow basePort, unset sandboxes pick a free port. */
  ports?: Partial<Record<AppName | SandboxName, number>>;
  logLevel?: string;
  /** Extra environment for every app. */
  env?: Record<string, string>;
  /** Apps to run (default: all four). */
  apps?: readonly AppName[];
  onLine?: (app: AppName, line: string) => void;
  /** Create the development key, sample template and sample user when missing. */
  seed?: boolean;
}

type SandboxName = "sandbox" | "plivoSandbox" | "pushSandbox";

export interface Stack {
  baseUrl: string;
  /** The SendGrid sandbox. */
  sandboxUrl: string;
  /** Every provider sandbox; each lists what it received under /sandbox/messages. */
  sandboxes: { sendgrid: string; plivo: string; push: string };
  databaseUrl: string;
  natsUrl: string;
  /** The development API key (plaintext), when seeded. */
  apiKey: string | null;
  apps: Map<AppName, AppProcess>;
  ports: Record<AppName | SandboxName, number>;
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
export const SAMPLE_USER = { userId: "user-123", email: "user-123@example.com", phone: "+14155550123" };

// Development-only credentials the sandboxes check and the apps are given.
const SANDBOX_SENDGRID_KEY = "SG.sandbox";
const SANDBOX_PLIVO = { authId: "MASANDBOX000000000000", authToken: "plivo-sandbox-token", from: "+14155550100" };

/**
 * Brings the whole service up on one machine: Postgres (the given one, or embedded PGlite),
 * NATS (the given one, or a local nats-server), migrations, the SendGrid sandbox, the four
 * apps, and, with `seed`, a development key, a sample template and a sample user.
 */
export async function startStack(options: StackOptions): Promise<Stack> {
  mkdirSync(options.dataDir, { recursive: true });
  const cleanups: Array<() => Promise<unknown>> = [];
  const stopAll = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  };
  try {
    let pg: EmbeddedPostgres | undefined;
    if (!options.databaseUrl) {
      pg = await startEmbeddedPostgres(join(options.dataDir, "pglite"), options.pglitePort ?? options.basePort + 32);
      cleanups.push(() => (pg as EmbeddedPostgres).stop());
    }
    const databaseUrl = options.databaseUrl ?? (pg as EmbeddedPostgres).url;
    const nats: LocalNats = await ensureNats(options.natsUrl, join(options.dataDir, "nats"), options.natsServerBin);
    cleanups.push(() => nats.stop());

    await runMigrations(databaseUrl);
    let apiKey: string | null = null;
    if (options.seed) apiKey = await seedDevelopment(databaseUrl, options.dataDir);

    const ports = {
      ingest: options.basePort,
      processor: options.basePort + 1,
      workers: options.basePort + 2,
      receipts: options.basePort + 3,
      sandbox: options.basePort + 10,
      ...options.ports,
    };
    // Tests that pick their ports leave the sandboxes they do not name on free ones, never on
    // basePort + n, which another test's free port may be.
    const sandboxPort = (name: "plivoSandbox" | "pushSandbox", offset: number) =>
      options.ports?.[name] ?? (options.ports ? 0 : options.basePort + offset);
    const receiptsUrl = `http://127.0.0.1:${ports.receipts}`;
    const webhookKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    const sandbox = await startSendgridSandbox({
      port: ports.sandbox,
      host: "127.0.0.1",
      apiKey: SANDBOX_SENDGRID_KEY,
      eventWebhookUrl: `${receiptsUrl}/webhooks/sendgrid`,
      webhookPrivateKey: webhookKeys.privateKey,
    });
    cleanups.push(() => sandbox.close());
    const plivo = await startPlivoSandbox({
      ...SANDBOX_PLIVO,
      port: sandboxPort("plivoSandbox", 11),
      host: "127.0.0.1",
    });
    cleanups.push(() => plivo.close());
    const vapid = generateVapidKeys();
    const push = await startPushSandbox({
      port: sandboxPort("pushSandbox", 12),
      host: "127.0.0.1",
      vapidPublicKey: vapid.publicKey,
    });
    cleanups.push(() => push.close());
    const caFile = join(options.dataDir, "push-sandbox-ca.pem");
    writeFileSync(caFile, push.ca);
    // The push sandbox keeps subscriptions in memory: the sample user gets a fresh one per start.
    if (options.seed) {
      const { id: _id, ...subscription } = push.subscribe();
      await seedPushSubscription(databaseUrl, subscription);
    }

    const common: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      CURSOR_SECRET: developmentCursorSecret(options.dataDir),
      ARCHIVE_DIR: join(options.dataDir, "archive"),
      NATS_URL: nats.url,
      NATS_NAMESPACE: options.namespace ?? "",
      LANE_PARTITIONS: String(options.partitions ?? 16),
      LOG_LEVEL: options.logLevel ?? "info",
      HOST: "127.0.0.1",
      // Workers: every channel through its sandbox (libs/providers channelProviderEnv).
      EMAIL_PROVIDER: "sandbox",
      SENDGRID_API_KEY: SANDBOX_SENDGRID_KEY,
      SENDGRID_BASE_URL: sandbox.url,
      SMS_PROVIDER: "sandbox",
      PLIVO_AUTH_ID: SANDBOX_PLIVO.authId,
      PLIVO_AUTH_TOKEN: SANDBOX_PLIVO.authToken,
      PLIVO_BASE_URL: plivo.url,
      SMS_FROM: SANDBOX_PLIVO.from,
      PLIVO_REPORT_URL: `${receiptsUrl}/webhooks/plivo`,
      PUSH_PROVIDER: "sandbox",
      VAPID_SUBJECT: "mailto:dev@notify.localhost",
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      PUSH_ALLOWED_HOSTS: "127.0.0.1,localhost",
      PUSH_ALLOW_PRIVATE_NETWORKS: "true",
      PUSH_CA_FILE: caFile,
      // Receipts: what verifies the sandboxes' signed receipts.
      SENDGRID_WEBHOOK_PUBLIC_KEY: sandbox.webhookPublicKey,
      // PGlite serves one query at a time: small pools avoid queueing behind each other.
      ...(pg ? { DB_POOL_SIZE: "4" } : {}),
      ...options.env,
    };
    const apps = new Map<AppName, AppProcess>();
    for (const name of options.apps ?? APPS) {
      const proc = spawnApp(name, { ...common, PORT: String(ports[name]) }, options.onLine);
      apps.set(name, proc);
      cleanups.push(() => proc.stop());
    }
    await Promise.all(
      [...apps.values()].map((proc) =>
        waitReady(`http://127.0.0.1:${ports[proc.name]}/readyz`, 60_000, () => proc.child.exitCode === null),
      ),
    );
    return {
      baseUrl: `http://127.0.0.1:${ports.ingest}`,
      sandboxUrl: sandbox.url,
      sandboxes: { sendgrid: sandbox.url, plivo: plivo.url, push: push.url },
      databaseUrl,
      natsUrl: nats.url,
      apiKey,
      apps,
      ports: { ...ports, plivoSandbox: plivo.port, pushSandbox: push.port },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * The development key is kept in plaintext in the data folder (development only) so that the
 * printed curl keeps working across restarts; only its hash is in the database.
 */
async function seedDevelopment(databaseUrl: string, dataDir: string): Promise<string> {
  const database = createDb({ url: databaseUrl, max: 1 });
  try {
    const keyFile = join(dataDir, "dev-api-key");
    let key = existsSync(keyFile) ? readFileSync(keyFile, "utf8").trim() : "";
    const known = key
      ? await database.sql`select 1 from api_keys where key_hash = ${hashKey(key)} and revoked_at is null`
      : [];
    if (known.length === 0) {
      key = await seedApiKey(database, { clientId: "dev", name: "development key", scopes: ["admin"] });
      writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
    }
    await seedTemplate(database, SAMPLE_TEMPLATE);
    await seedContact(database, SAMPLE_USER);
    return key;
  } finally {
    await database.close();
  }
}

/**
 * Ingest refuses to start without CURSOR_SECRET; the stack keeps one in the data folder, like the
 * development key, so list cursors keep working across restarts.
 */
function developmentCursorSecret(dataDir: string): string {
  const file = join(dataDir, "cursor-secret");
  const stored = existsSync(file) ? readFileSync(file, "utf8").trim() : "";
  if (stored.length >= 32) return stored;
  const secret = randomBytes(32).toString("base64url");
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

async function seedPushSubscription(databaseUrl: string, subscription: DeviceToken): Promise<void> {
  const database = createDb({ url: databaseUrl, max: 1 });
  try {
    await database.sql`insert into user_preferences (user_id, device_tokens)
      values (${SAMPLE_USER.userId}, ${database.sql.json([subscription] as never)})
      on conflict (user_id) do update set device_tokens = excluded.device_tokens, updated_at = now()`;
  } finally {
    await database.close();
  }
}
