import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * What one data folder remembers between starts: the ports it picked (so the printed curl, the
 * push subscriptions' endpoints and an operator's psql line stay valid) and, on a shared NATS,
 * the namespace of its streams.
 */
export interface StackState {
  ports: Record<string, number>;
  namespace?: string;
  /** The push endpoint the sample user was given (subscribed on the first start only). */
  sampleSubscription?: string;
}

const stateFile = (dataDir: string) => join(dataDir, "stack.json");

export function loadState(dataDir: string): StackState {
  try {
    const parsed = JSON.parse(readFileSync(stateFile(dataDir), "utf8")) as Partial<StackState>;
    return {
      ports: { ...(parsed.ports ?? {}) },
      ...(parsed.namespace ? { namespace: parsed.namespace } : {}),
      ...(parsed.sampleSubscription ? { sampleSubscription: parsed.sampleSubscription } : {}),
    };
  } catch {
    return { ports: {} };
  }
}

export function saveState(dataDir: string, state: StackState): void {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(stateFile(dataDir), `${JSON.stringify(state, null, 2)}\n`);
}

/** This data folder's namespace on a shared NATS: made once, then kept. */
export function sharedNamespace(state: StackState): string {
  state.namespace ??= `notify${randomBytes(4).toString("hex")}`;
  return state.namespace;
}

const LOWEST_PORT = 20_000;
const PORT_RANGE = 12_000;
const HANDED_OUT_MS = 60_000;
const handedOut = new Map<number, number>();
/**
 * How long another process's claim keeps a port from being handed out: long enough to cover a
 * stack's restart, which takes its remembered ports back without a claim of its own (a power
 * cut and `npm start` again, minutes later), so that nobody else is handed them meanwhile.
 */
const CLAIM_MS = 15 * 60_000;

/** Whether a TCP port on loopback can be listened on now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * Ports handed out on this machine, one file per port: processes pick ports at the same time
 * (test files run in parallel, each starting stacks) and bind them only later, so a port free
 * when one process checks may already be another's. A claim is exclusive (created with `wx`)
 * and lapses after CLAIM_MS, by when its taker listens on it, has given it up, or has taken it
 * back as a remembered port.
 */
const CLAIMS = join(tmpdir(), "notify-port-claims");

function claim(port: number, now: number): boolean {
  const file = join(CLAIMS, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        mkdirSync(CLAIMS, { recursive: true });
        continue;
      }
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      // A lapsed claim is removed and taken afresh; whoever creates the file next wins it.
      const age = now - (statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0);
      if (age <= CLAIM_MS) return false;
      rmSync(file, { force: true });
    }
  }
  return false;
}

/**
 * Marks a port this process will listen on though freePort did not hand it out (a stack's ports
 * that follow its base port), so that no other process is handed it meanwhile. It overwrites a
 * claim already there: the port is fixed, and such a claim is most often a finished test's.
 */
export function claimFixedPort(port: number): void {
  mkdirSync(CLAIMS, { recursive: true });
  writeFileSync(join(CLAIMS, String(port)), String(process.pid));
}

/** Whether some process of this machine was handed `port` by freePort within CLAIM_MS. */
export function portClaimed(port: number): boolean {
  const stat = statSync(join(CLAIMS, String(port)), { throwIfNoEntry: false });
  return stat !== undefined && Date.now() - stat.mtimeMs <= CLAIM_MS;
}

/**
 * A free port on loopback, picked at random below the kernel's ephemeral range (32768 and up on
 * Linux): a port the system hands out as free is also what it hands to the next outgoing
 * connection of any process, which may take it before the caller listens on it. A port is not
 * handed out twice within a minute by this process, nor within CLAIM_MS by any other that uses
 * this function (see CLAIMS): callers bind theirs later, so a port free at the second call may
 * still be the first caller's.
 */
export async function freePort(avoid: Iterable<number> = []): Promise<number> {
  const skip = new Set(avoid);
  const now = Date.now();
  for (const [port, at] of handedOut) if (now - at > HANDED_OUT_MS) handedOut.delete(port);
  const start = Math.floor(Math.random() * PORT_RANGE);
  for (let i = 0; i < PORT_RANGE; i++) {
    const port = LOWEST_PORT + ((start + i) % PORT_RANGE);
    if (skip.has(port) || handedOut.has(port)) continue;
    if ((await portFree(port)) && claim(port, now)) {
      handedOut.set(port, now);
      return port;
    }
  }
  throw new Error(`no free port between ${LOWEST_PORT} and ${LOWEST_PORT + PORT_RANGE} on 127.0.0.1`);
}

/**
 * The port remembered under `name` when it is still free and no other name holds it, otherwise
 * a new free one (remembered) that no other name of the stack holds either: the stack listens
 * on all of them only later, so a port free now may be another name's.
 */
export async function rememberedPort(state: StackState, name: string): Promise<number> {
  const known = state.ports[name];
  const others = Object.entries(state.ports).flatMap(([other, port]) => (other === name ? [] : [port]));
  if (known !== undefined && !others.includes(known) && (await portFree(known))) return known;
  const port = await freePort(others);
  state.ports[name] = port;
  return port;
}

/**
 * The running stack's settings for the `notify` CLI and scripts (`<dataDir>/stack.env`, mode
 * 600: it holds the database password), written once everything is up and removed on a clean stop.
 */
export const stackEnvFile = (dataDir: string) => join(dataDir, "stack.env");

export function writeStackEnv(dataDir: string, values: Record<string, string>): void {
  const lines = Object.entries(values).map(([key, value]) => `${key}=${JSON.stringify(value)}`);
  writeFileSync(
    stackEnvFile(dataDir),
    `# The running notify stack (npm start); removed when it stops.\n${lines.join("\n")}\n`,
    {
      mode: 0o600,
    },
  );
}

export function removeStackEnv(dataDir: string): void {
  rmSync(stackEnvFile(dataDir), { force: true });
}

/** A secret kept in a file of the data folder (mode 600), made on first use. */
export function storedSecret(
  dataDir: string,
  name: string,
  make: () => string = () => randomBytes(32).toString("base64url"),
): string {
  const file = join(dataDir, name);
  const stored = existsSync(file) ? readFileSync(file, "utf8").trim() : "";
  if (stored) return stored;
  const secret = make();
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}
