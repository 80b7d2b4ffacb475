import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * The PostgreSQL and NATS that scripts/test-services.mjs (tap's "before") started for this run
 * because the configured ones did not answer, from the run's state file: named by the pid of the
 * tap runner, the parent of every test file's process. Nothing when it started none, or when a
 * file runs outside tap.
 */
function ownServices(): { databaseUrl?: string; natsUrl?: string } {
  try {
    return JSON.parse(readFileSync(join(tmpdir(), `notify-test-run-${process.ppid}.json`), "utf8"));
  } catch {
    return {};
  }
}

const own = ownServices();

/** Postgres the tests use: TEST_DATABASE_URL (by default trust auth on 127.0.0.1:5432), or the run's own. */
export const TEST_PG_URL =
  own.databaseUrl ?? (process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres");
/** NATS (with JetStream) the tests use: TEST_NATS_URL (by default 127.0.0.1:4222), or the run's own. */
export const TEST_NATS_URL = own.natsUrl ?? (process.env.TEST_NATS_URL || "nats://127.0.0.1:4222");

// A process a test file starts (a script that imports this package, an app told to read these)
// reaches the same servers.
if (own.databaseUrl) process.env.TEST_DATABASE_URL = own.databaseUrl;
if (own.natsUrl) process.env.TEST_NATS_URL = own.natsUrl;
