import { type Bus, connectBus } from "@notify/bus";
import type { LaneMessage, NotificationRequest } from "@notify/core";
import type { Database } from "@notify/db";
import { toAppError } from "@notify/http";
import { startCancelResponder, startDeadLetterResponder } from "@notify/ops";
import { captureLogger, freshBus, freshDatabase, TEST_NATS_URL } from "@notify/testing";
import type { Test } from "tap";
import { createAdminApp, createApp } from "../src/app.js";
import { createKeyLookup } from "../src/auth/api-keys.js";
import type { IngestDeps } from "../src/deps.js";
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
    lookupKey: createKeyLookup(database, 0, { log }),
    templates,
    ingestor: createIngestor({ database, bus, log, templates }),
    maxBodyBytes: 65_536,
    cursorSecret: "test-cursor-secret-0123456789abcdef",
    isStopping: () => false,
    ...overrides,
  };
  return { app: createApp(deps), admin: createAdminApp(deps), deps, database, bus, log, lines };
}

/** Another ingest instance's NATS connection, on the same namespace as `bus`, closed at teardown. */
export async function otherConnection(t: Pick<Test, "teardown">, bus: Bus): Promise<Bus> {
  const own = await connectBus({
    servers: TEST_NATS_URL,
    name: "ingest-b",
    namespace: bus.naming.namespace,
    partitions: bus.naming.partitions,
  });
  // Its subscriptions end with it.
  t.teardown(() => own.close());
  return own;
}

/** The least valid request, for a user: what the group-commit tests send. */
export const minimalRequest = (userId: string): NotificationRequest => ({
  user_id: userId,
  category: "orders",
  template_id: "welcome",
  data: {},
  priority: "transactional",
});

/**
 * The processor's answers to ingest's dead-letter routes (notify.ops.dlq.list, notify.ops.dlq.show,
 * notify.ops.replay), run in the test process on the test's database and namespace, stopped at
 * teardown: without it every dead-letter route is 503.
 */
export async function deadLetterResponder(
  t: Pick<Test, "teardown">,
  deps: Pick<IngestDeps, "database" | "bus" | "log">,
  criticalCategories: readonly string[] = [],
) {
  const responder = startDeadLetterResponder({ ...deps, criticalCategories, explain: toAppError });
  t.teardown(() => responder.stop());
  await responder.ready;
  return responder;
}

/**
 * The processor's answer to ingest's cancels (notify.ops.cancel), run in the test process on the
 * test's database and namespace, stopped at teardown: without it POST …/cancel is 503.
 */
export async function cancelResponder(t: Pick<Test, "teardown">, deps: Pick<IngestDeps, "database" | "bus" | "log">) {
  const responder = startCancelResponder({ ...deps, explain: toAppError });
  t.teardown(() => responder.stop());
  await responder.ready;
  return responder;
}

/** The same pool, counting the statements sent through it (what a test asserts a path costs). */
export function countingDatabase(database: Database) {
  const counter = { queries: 0 };
  const sql = new Proxy(database.sql, {
    apply(target, self, args) {
      counter.queries += 1;
      return Reflect.apply(target, self, args);
    },
  });
  return { counter, database: { ...database, sql } as Database };
}

/** One server-sent event as a client reads it: its fields, or the text of a comment line. */
export interface SseEvent {
  event?: string;
  id?: string;
  data?: string;
  comment?: string;
}

/** The complete events in a stream's text so far (an event ends at a blank line). */
export const sseEvents = (text: string): SseEvent[] =>
  text
    .split("\n\n")
    .slice(0, -1)
    .map((block) => {
      const event: SseEvent = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) event.comment = line.slice(1).trim();
        const match = /^(event|id|data): ?(.*)$/.exec(line);
        if (match) event[match[1] as "event" | "id" | "data"] = match[2];
      }
      return event;
    });

/** The transactional lane's stored messages for one notification, oldest first. */
export async function laneMessagesFor(bus: Bus, id: string): Promise<LaneMessage[]> {
  const found: LaneMessage[] = [];
  const stream = bus.streams.lane("transactional");
  const info = await bus.jsm.streams.info(stream);
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const message = await bus.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    const value = message?.json<LaneMessage>();
    if (value?.notification_id === id) found.push(value);
  }
  return found;
}
