import { setTimeout as sleep } from "node:timers/promises";
import { configuredDatabaseUrl, configuredNatsUrl, readRunState } from "./test-services.js";

/**
 * The PostgreSQL and NATS that scripts/test-services.mjs (tap's "before") keeps for this run
 * because the configured ones do not serve the tests, from the run's state file: named by the
 * pid of the tap runner, the parent of every test file's process. The servers start when the
 * first test file that needs them loads this module, so a run of files that need none starts
 * none. Nothing when the run keeps none, when its supervisor is gone, or when a file runs
 * outside tap.
 */
async function ownServices(): Promise<{ databaseUrl?: string; natsUrl?: string }> {
  let state = readRunState(process.ppid);
  if (state === null) return {};
  if (state.status === "idle") {
    try {
      process.kill(state.supervisor, "SIGUSR2");
    } catch {}
  }
  const deadline = Date.now() + 170_000;
  while (state.status !== "ready") {
    if (state.status === "failed") throw new Error(`test services: ${state.error}`);
    if (Date.now() > deadline) throw new Error(`test services: not started within 170 s (see ${state.dir})`);
    await sleep(100);
    state = readRunState(process.ppid);
    if (state === null) throw new Error("test services: the run's supervisor is gone");
  }
  return state;
}

const own = await ownServices();

/** Postgres the tests use: TEST_DATABASE_URL (by default trust auth on 127.0.0.1:5432), or the run's own. */
export const TEST_PG_URL = own.databaseUrl ?? configuredDatabaseUrl();
/** NATS (with JetStream) the tests use: TEST_NATS_URL (by default 127.0.0.1:4222), or the run's own. */
export const TEST_NATS_URL = own.natsUrl ?? configuredNatsUrl();

// A process a test file starts (a script that imports this package, an app told to read these)
// reaches the same servers.
if (own.databaseUrl) process.env.TEST_DATABASE_URL = own.databaseUrl;
if (own.natsUrl) process.env.TEST_NATS_URL = own.natsUrl;
