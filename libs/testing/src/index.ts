import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { bucketName, connectBus, loadTopologyFile, streamName } from "@notify/bus";
import { createDb, type Database, MIGRATIONS_FOLDER, runMigrations } from "@notify/db";
import postgres from "postgres";
import { TEST_NATS_URL, TEST_PG_URL } from "./services.js";

interface Teardown {
  teardown(fn: () => unknown): void;
}

const withDatabase = (url: string, name: string) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

/** Name of the migrated template database: changes whenever a migration changes. */
function templateName(): string {
  const hash = createHash("sha256");
  for (const file of readdirSync(MIGRATIONS_FOLDER)
    .filter((f) => f.endsWith(".sql"))
    .sort()) {
    hash.update(file).update(readFileSync(`${MIGRATIONS_FOLDER}/${file}`));
  }
  return `notify_tpl_${hash.digest("hex").slice(0, 16)}`;
}

/**
 * A fresh, migrated database for one test file: CREATE DATABASE ... TEMPLATE of a database
 * migrated once per migration set, so files run in parallel without sharing rows. Dropped on
 * teardown.
 */
export async function freshDatabase(t: Teardown): Promise<{ url: string; database: Database }> {
  const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  const template = templateName();
  const name = `notify_t_${randomBytes(6).toString("hex")}`;
  try {
    await admin`select pg_advisory_lock(7266002)`;
    const [exists] = await admin`select 1 from pg_database where datname = ${template}`;
    if (!exists) {
      await admin.unsafe(`create database ${template}`);
      await runMigrations(withDatabase(TEST_PG_URL, template));
    }
    await admin.unsafe(`create database ${name} template ${template}`);
  } finally {
    await admin`select pg_advisory_unlock(7266002)`.catch(() => {});
    await admin.end();
  }
  const url = withDatabase(TEST_PG_URL, name);
  const database = createDb({ url, max: 4 });
  t.teardown(async () => {
    await database.close();
    const drop = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
    await drop.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
    await drop.end();
  });
  return { url, database };
}

/**
 * A NATS namespace of one test file: its streams, subjects and KV buckets carry a unique
 * prefix, and are deleted on teardown.
 */
export function freshNamespace(t: Teardown): string {
  const namespace = `t${randomBytes(5).toString("hex")}`;
  t.teardown(() => deleteNamespace(namespace));
  return namespace;
}

/**
 * A file stream that is never deleted. nats-server 2.9 removes the account's stream folder with
 * its last file stream, and a stream another test file creates at that instant fails with
 * "could not create storage directory": while this one exists, the folder never goes.
 */
const ANCHOR = { name: "NOTIFY_TEST_ANCHOR", subjects: ["notify_test_anchor"], max_msgs: 1 };

export async function deleteNamespace(namespace: string): Promise<void> {
  const bus = await connectBus({ servers: TEST_NATS_URL, name: "notify-test-cleanup", namespace, partitions: 1 });
  await bus.jsm.streams.add(ANCHOR).catch(() => undefined);
  const topology = loadTopologyFile();
  const naming = { namespace, partitions: 1 };
  const names = [
    ...topology.streams.map((s) => streamName(naming, s.name)),
    ...topology.kv.map((k) => `KV_${bucketName(naming, k.bucket)}`),
  ];
  for (const name of names) await bus.jsm.streams.delete(name).catch(() => false);
  await bus.close();
}

/** Polls until `check` returns a value other than undefined, or fails after the timeout. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 15_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
}

/**
 * A notification row of `clientId` for `userId` (nothing published), for tests that store what a
 * worker would for it: the in-app inbox takes its client from this row.
 */
export async function seedNotification(
  database: Database,
  row: { id: string; clientId: string; userId: string; category?: string; createdAt?: Date },
): Promise<void> {
  await database.sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    values (${row.id}, ${row.clientId}, ${row.userId}, ${row.category ?? "account"}, 'welcome', 'transactional', '{}', ${row.id}, 'seeded', 0,
            coalesce(${row.createdAt ?? null}::timestamptz, now()))
    on conflict do nothing`;
}

/**
 * A pool of its own on `url` that counts the statements it sends, for tests of what goes in one
 * statement, and shows each to `onStatement` (its text and parameters, as sent). Counting starts
 * after its first statement (which also reads the server's types).
 */
export async function countingDatabase(
  t: Teardown,
  url: string,
  onStatement?: (query: string, parameters: readonly unknown[]) => void,
): Promise<Database & { statements(): number }> {
  let count = 0;
  const sql = postgres(url, {
    max: 4,
    onnotice: () => {},
    debug: (_connection, query, parameters) => {
      count++;
      onStatement?.(query, parameters);
    },
  });
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`select 1`;
  count = 0;
  return { sql, close: () => sql.end(), ping: async () => true, statements: () => count };
}

/** True while the notification is listed in publish_outbox (its lane publish not settled). */
export async function inOutbox(database: Database, notificationId: string): Promise<boolean> {
  const [row] = await database.sql<{ listed: boolean }[]>`
    select exists (select 1 from publish_outbox where ${notificationId} = any(notification_ids)) as listed`;
  return row?.listed === true;
}

/** Waits until the notification's lane publish is settled (it left publish_outbox). */
export async function settled(database: Database, notificationId: string, timeoutMs = 5000): Promise<void> {
  await eventually(
    async () => ((await inOutbox(database, notificationId)) ? undefined : true),
    timeoutMs,
    "the publish to be settled (outbox row deleted)",
  );
}

/** A free TCP port on loopback. */
export { freePort } from "@notify/devstack";
export { freshBus, streamCount } from "./bus.js";
export { deadLetterOf } from "./dead-letters.js";
export {
  devKey,
  errorLines,
  getJson,
  getWithCa,
  killEverything,
  npmStart,
  postNotification,
  receivedByProviders,
  serversAlive,
  settledView,
  stackEnv,
  stackMemory,
} from "./embedded.js";
export { captureLogger } from "./logger.js";
export { startNatsWithUsers } from "./nats-users.js";
export { OTLP_KIND, type ReceivedSpan, startOtlpReceiver } from "./otlp.js";
export { proxiedDependencies, whileCut } from "./outage.js";
export { freshAppRoles } from "./postgres-roles.js";
export { TEST_NATS_URL, TEST_PG_URL } from "./services.js";
export { startTestStack } from "./stack.js";
export { startTcpProxy } from "./tcp-proxy.js";
