import { createWriteStream, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StackOptions } from "@notify/devstack";
import { freePort } from "@notify/devstack/local";
import { freshNamespace } from "./bus.js";
import { freshDatabase } from "./database.js";
import { TEST_NATS_URL } from "./services.js";

interface TestContext {
  teardown(fn: () => unknown): void;
  comment(...message: unknown[]): void;
  passing(): boolean;
}

/**
 * The whole service as real processes for one test file: a fresh database and NATS namespace,
 * free ports, the sandboxes, a seeded development key; the apps' log lines become TAP
 * comments (and reach `options.onLine` too). Stopped on teardown. `dataDir` is where the stack
 * keeps its files (the push sandbox's CA, the development key).
 */
export async function startTestStack(t: TestContext, options: Partial<StackOptions> = {}) {
  const { url } = await freshDatabase(t);
  const ports = {
    ingest: await freePort(),
    processor: await freePort(),
    workers: await freePort(),
    receipts: await freePort(),
    sandbox: await freePort(),
  };
  const dataDir = mkdtempSync(join(tmpdir(), "notify-stack-"));
  // The apps' lines go to a file, and into the report only when the file fails (its last 200).
  const logFile = join(dataDir, "apps.log");
  const out = createWriteStream(logFile);
  const recent: string[] = [];
  // Registered before the stop: teardowns run last first, so the shutdown lines are included.
  t.teardown(() => {
    out.end();
    if (t.passing()) return rmSync(dataDir, { recursive: true, force: true });
    t.comment(`app logs: ${logFile}`);
    for (const line of recent) t.comment(line);
  });
  // Loaded here, not at the top: every test file imports this package, most never start a stack,
  // and the stack's modules (the providers, the sandboxes) are costly to import.
  const { startStack } = await import("@notify/devstack");
  const stack = await startStack({
    dataDir,
    databaseUrl: url,
    natsUrl: TEST_NATS_URL,
    namespace: freshNamespace(t),
    partitions: 2,
    basePort: ports.ingest,
    ports,
    logLevel: "warn",
    seed: true,
    ...options,
    // The test's own `onLine` sees every line too (a check of what the apps logged).
    onLine: (app, line) => {
      out.write(`[${app}] ${line}\n`);
      recent.push(`[${app}] ${line}`);
      if (recent.length > 200) recent.shift();
      options.onLine?.(app, line);
    },
  }).catch((error: Error) => {
    // A stack that never came up fails the file before any teardown could show why.
    throw new Error(`${error.message}\nlast app lines:\n${recent.slice(-40).join("\n")}`);
  });
  t.teardown(() => stack.stop());
  return { stack, ports, dataDir, auth: { authorization: `Bearer ${stack.apiKey}` } };
}
