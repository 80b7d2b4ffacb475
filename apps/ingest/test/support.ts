import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import type { Test } from "tap";
import { createAdminApp, createApp, type IngestDeps } from "../src/app.js";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { createIngestor } from "../src/notifications/create.js";
import { createTemplateLookup } from "../src/notifications/templates.js";

/**
 * The ingest app for app.request() tests, on a fresh database and a fresh NATS namespace.
 * Lookups are not cached, so a change made by a test is seen by the next request.
 */
export async function ingestApp(t: Pick<Test, "teardown">, overrides: Partial<IngestDeps> = {}) {
  const database = overrides.database ?? (await freshDatabase(t)).database;
  const bus = overrides.bus ?? (await freshBus(t));
  const captured = captureLogger("ingest");
  const log = overrides.log ?? captured.log;
  const lines = captured.lines;
  const templates = createTemplateLookup(database, 0);
  const deps: IngestDeps = {
    database,
    bus,
    log,
    lookupKey: createKeyLookup(database, 0, log),
    templates,
    ingestor: createIngestor({ database, bus, log, templates }),
    maxBodyBytes: 65_536,
    cursorSecret: "test-cursor-secret-0123456789abcdef",
    isStopping: () => false,
    ...overrides,
  };
  return { app: createApp(deps), admin: createAdminApp(deps), deps, database, bus, log, lines };
}
