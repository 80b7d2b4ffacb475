import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hashKey } from "@notify/core";
import { createDb, runMigrations, seedApiKey, seedContact, seedTemplate } from "@notify/db";
import { startSendgridSandbox } from "@notify/providers";
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
  /** Port of ingest; the others follow (processor +1, workers +2, receipts +3, sandbox +10). */
  basePort: number;
  pglitePort?: number;
  /** Explicit ports (tests pick free ones); unset ones follow basePort. */
  ports?: Partial<Record<AppName | "sandbox", number>>;
  logLevel?: string;
  /** Extra environment for every app. */
  env?: Record<string, string>;
  /** Apps to run (default: all four). */
  apps?: readonly AppName[];
  onLine?: (app: AppName, line: string) => void;
  /** Create the development key, sample template and sample user when missing. */
  seed?: boolean;
}

export interface Stack {
  baseUrl: string;
  sandboxUrl: string;
  databaseUrl: string;
  natsUrl: string;
  /** The development API key (plaintext), when seeded. */
  apiKey: string | null;
  apps: Map<AppName, AppProcess>;
  ports: Record<AppName | "sandbox", number>;
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
export const SAMPLE_USER = { userId: "user-123", email: "user-123@example.com" };

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
    const sandbox = await startSendgridSandbox({ port: ports.sandbox, host: "127.0.0.1", apiKey: "SG.sandbox" });
    cleanups.push(() => sandbox.close());

    const common: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      NATS_URL: nats.url,
      NATS_NAMESPACE: options.namespace ?? "",
      LANE_PARTITIONS: String(options.partitions ?? 16),
      LOG_LEVEL: options.logLevel ?? "info",
      HOST: "127.0.0.1",
      SENDGRID_API_KEY: "SG.sandbox",
      SENDGRID_BASE_URL: sandbox.url,
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
      databaseUrl,
      natsUrl: nats.url,
      apiKey,
      apps,
      ports,
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
