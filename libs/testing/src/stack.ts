import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type StackOptions, startStack } from "@notify/stack";
import { freePort, freshDatabase, freshNamespace, TEST_NATS_URL } from "./index.js";

interface TestContext {
  teardown(fn: () => unknown): void;
  comment(...message: unknown[]): void;
}

/**
 * The whole service as real processes for one test file: a fresh database and NATS namespace,
 * free ports, the sandboxes, a seeded development key; the apps' log lines become TAP
 * comments. Stopped on teardown. `dataDir` is where the stack keeps its files (the push
 * sandbox's CA, the development key).
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
    onLine: (app, line) => t.comment(`[${app}] ${line}`),
    ...options,
  });
  t.teardown(() => stack.stop());
  return { stack, ports, dataDir, auth: { authorization: `Bearer ${stack.apiKey}` } };
}
