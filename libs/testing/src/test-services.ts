import { readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { connectBus } from "@notify/bus";
import postgres from "postgres";

/**
 * What tap's before and after scripts (scripts/test-services.mjs, scripts/test-services-stop.mjs)
 * and the test files (services.ts) share: the servers the tests are configured with, the checks
 * that those serve the tests, and the run's state file, through which the servers the run starts
 * itself reach the test files. The scripts import it as @notify/testing/test-services: tap runs
 * them with the test files' node arguments (tsx and the @notify/source condition), so they get
 * this source; plain node gets dist/.
 */

/** The PostgreSQL of the tests when TEST_DATABASE_URL is unset: trust auth on loopback, a superuser. */
export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";
/** The NATS (with JetStream) of the tests when TEST_NATS_URL is unset. */
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

/** The PostgreSQL the tests are configured with. */
export const configuredDatabaseUrl = () => process.env.TEST_DATABASE_URL || DEFAULT_DATABASE_URL;
/** The NATS the tests are configured with. */
export const configuredNatsUrl = () => process.env.TEST_NATS_URL || DEFAULT_NATS_URL;

/** The first host:port of a server URL (NATS takes a comma-separated list), for messages: no credentials. */
export function serverAddress(url: string, defaultPort: number): string {
  try {
    const u = new URL((url.split(",")[0] ?? "").trim());
    return `${u.hostname}:${u.port || defaultPort}`;
  } catch {
    return "an unreadable URL";
  }
}

/** Why the tests cannot use the PostgreSQL at `url`, or null: they connect, and as a superuser (they create databases and roles). */
export async function postgresProblem(url: string): Promise<string | null> {
  const sql = postgres(url, { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    const [row] = await sql<{ superuser: string }[]>`select current_setting('is_superuser') as superuser`;
    return row?.superuser === "on" ? null : "its user is not a superuser (the tests create databases and roles)";
  } catch (error) {
    if ((error as { code?: string }).code === "ECONNREFUSED") return "nothing answers there";
    return error instanceof Error ? error.message : String(error);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/** Why the tests cannot use the NATS at `url`, or null: they connect, and JetStream answers. */
export async function natsProblem(url: string): Promise<string | null> {
  try {
    const bus = await connectBus({ servers: url, name: "notify-test-check", namespace: "", partitions: 1 });
    await bus.close();
    return null;
  } catch (error) {
    const name = error instanceof Error ? error.name : "";
    const message = error instanceof Error ? error.message : String(error);
    if (message === "connection refused") return "nothing answers there";
    if (name === "JetStreamNotEnabled") return "JetStream is not enabled on it (nats-server -js)";
    return message;
  }
}

/**
 * The state of a run that needs servers of its own, in its state file: written by its
 * supervisor, named by the tap runner's pid (the parent of every test file's process).
 * `idle` until a test file asks (SIGUSR2 to the supervisor), then `starting`, and `ready` with
 * the URLs or `failed` with the reason. The pids and the folder let a later run stop what a
 * killed supervisor left running.
 */
export interface RunState {
  runner: number;
  /** Start time of the runner and of the supervisor (processStart): a reused pid is not theirs. */
  runnerStart: string | null;
  supervisor: number;
  supervisorStart: string | null;
  /** The run's folder: the servers' data and logs. */
  dir: string;
  wants: { postgres: boolean; nats: boolean };
  status: "idle" | "starting" | "ready" | "failed";
  databaseUrl?: string;
  natsUrl?: string;
  postgresPid?: number;
  natsPid?: number;
  error?: string;
}

const STATE_FILE = /^notify-test-run-(\d+)\.json$/;
/** The folders of the runs' servers, under the temporary folder. */
export const RUN_DIR_PREFIX = "notify-test-services-";

/** The state file of `runner`'s run. */
export const stateFile = (runner: number) => join(tmpdir(), `notify-test-run-${runner}.json`);

/**
 * When `pid` started, in clock ticks since boot (Linux /proc): with the pid it names one process,
 * whatever later takes the number. Null where there is no /proc, or when the process is gone or
 * a zombie (killed, not yet reaped).
 */
export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The fields after the command's closing parenthesis start at the third (the state); the 22nd is starttime.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" || fields[0] === "X" ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

/** Whether the process `pid` that started at `start` still runs; without a start time, whether the pid does. */
export function stillRunning(pid: number, start: string | null | undefined): boolean {
  if (typeof start === "string") return processStart(pid) === start;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A state file, if it is there, readable and this user's (the temporary folder is everyone's). */
function readStateFile(file: string): RunState | null {
  try {
    if (process.getuid && statSync(file).uid !== process.getuid()) return null;
    return JSON.parse(readFileSync(file, "utf8")) as RunState;
  } catch {
    return null;
  }
}

/** The state of `runner`'s run while its supervisor runs; null when there is none, or it is a stale file. */
export function readRunState(runner: number): RunState | null {
  const state = readStateFile(stateFile(runner));
  if (state === null || state.runner !== runner || !stillRunning(runner, state.runnerStart)) return null;
  return stillRunning(state.supervisor, state.supervisorStart) ? state : null;
}

/** Writes the state whole (a reader never sees half of it), readable by this user only. */
export function writeRunState(state: RunState): void {
  const file = stateFile(state.runner);
  const scratch = `${file}.${process.pid}.tmp`;
  writeFileSync(scratch, `${JSON.stringify(state)}\n`, { mode: 0o600 });
  renameSync(scratch, file);
}

/** Removes `runner`'s state file if it is still `supervisor`'s. */
export function removeRunState(runner: number, supervisor: number): void {
  const file = stateFile(runner);
  if (readStateFile(file)?.supervisor === supervisor) rmSync(file, { force: true });
}

/**
 * The state files of this user whose supervisor is gone (killed, with no chance to clean up),
 * with the folder of their servers when it is one a run made.
 */
export function staleRunStates(): Array<{ file: string; state: RunState | null; dir: string | null }> {
  const stale = [];
  for (const name of readdirSync(tmpdir())) {
    if (!STATE_FILE.test(name)) continue;
    const file = join(tmpdir(), name);
    const state = readStateFile(file);
    if (state !== null && stillRunning(state.supervisor, state.supervisorStart)) continue;
    if (state === null && process.getuid && statSync(file, { throwIfNoEntry: false })?.uid !== process.getuid())
      continue;
    const made = typeof state?.dir === "string" ? state.dir : "";
    const dir = dirname(made) === tmpdir() && basename(made).startsWith(RUN_DIR_PREFIX) ? made : null;
    stale.push({ file, state, dir });
  }
  return stale;
}
