import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tcpAnswers } from "./nats-server.js";
import { APPS } from "./paths.js";
import type { Stack } from "./stack.js";

/** The file `turbo dev`'s app tasks wait for and start with (scripts/dev-app.mjs). */
export const devEnvFile = (dataDir: string) => join(dataDir, "dev.json");

/**
 * What the stack adds to an app's environment (the app task inherits the user's own from turbo),
 * each app's port, and the pid of the process that keeps the servers up: an app task waits for a
 * live one and never starts on the settings of a stack that is gone.
 */
export function writeDevEnv(dataDir: string, stack: Stack, userEnv: Record<string, string | undefined>): void {
  const env = Object.fromEntries(Object.entries(stack.appEnv).filter(([key, value]) => userEnv[key] !== value));
  const settings = {
    pid: process.pid,
    env,
    ports: Object.fromEntries(APPS.map((app) => [app, stack.ports[app]])),
    // The operator's ports (health, readiness, metrics) of the apps that have a public one.
    adminPorts: { ingest: stack.ports.ingestAdmin, receipts: stack.ports.receiptsAdmin },
  };
  writeFileSync(devEnvFile(dataDir), `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
  process.once("exit", () => rmSync(devEnvFile(dataDir), { force: true }));
}

/** Waits until no app answers on its port any more, or the timeout. */
export async function appsStopped(stack: Stack, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answering = await Promise.all(APPS.map((app) => tcpAnswers("127.0.0.1", stack.ports[app], 200)));
    if (!answering.some(Boolean)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
