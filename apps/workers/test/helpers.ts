import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Kvm } from "@nats-io/kv";
import { type Bus, bucketName, type KV } from "@notify/bus";
import type { Channel, DeadLetter, Priority, ProviderAnswer, WorkItem } from "@notify/core";
import type { Database } from "@notify/db";
import { createMetrics, type MetricsRegistry } from "@notify/http";
import type { OutboundMessage, Provider } from "@notify/providers";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import type { DeliverDeps } from "../src/delivery/deliver.js";
import { createUnusedClaims } from "../src/delivery/unused-claims.js";
import { createDeliveryMetrics, type DeliveryMetrics } from "../src/metrics.js";
import { createGates, type GateSettings, type ProviderGate } from "../src/providers/gate.js";

type Tap = { teardown(fn: () => unknown): void };

export const GATE_SETTINGS: GateSettings = {
  rateLimits: {},
  defaultRate: { perSecond: 10_000, burst: 10_000 },
  transactionalReservedPercent: 20,
  breaker: {
    windowCalls: 1000,
    minCalls: 1000,
    failurePercent: 50,
    slowCallMs: 60_000,
    openMs: 1000,
    halfOpenProbes: 1,
  },
  deadlineMs: 4000,
};

export interface Harness {
  database: Database;
  url: string;
  bus: Bus;
  guard: KV;
  rateKv: KV;
  registry: MetricsRegistry;
  metrics: DeliveryMetrics;
  log: ReturnType<typeof captureLogger>;
  gates(providers: Provider[], settings?: Partial<GateSettings>): ProviderGate[];
  deps(gate: ProviderGate, overrides?: Partial<DeliverDeps>): DeliverDeps;
}

/** A fresh database and NATS namespace, and what deliver() and the pools need around them. */
export async function harness(t: Tap): Promise<Harness> {
  const { database, url } = await freshDatabase(t);
  const bus = await freshBus(t);
  const guard = await bus.kv("notify_send_guard");
  const rateKv = await new Kvm(bus.js).open(bucketName(bus.naming, "notify_rate"));
  const registry = createMetrics("workers");
  const metrics = createDeliveryMetrics(registry);
  const log = captureLogger("workers");
  const opened: ProviderGate[] = [];
  t.teardown(() => {
    for (const gate of opened) gate.close();
  });
  return {
    database,
    url,
    bus,
    guard,
    rateKv,
    registry,
    metrics,
    log,
    gates(providers, settings = {}) {
      const gates = createGates(providers, {
        rateKv,
        metrics,
        log: log.log,
        settings: { ...GATE_SETTINGS, ...settings },
      });
      opened.push(...gates);
      return gates;
    },
    deps(gate, overrides = {}) {
      return {
        sql: database.sql,
        bus,
        guard,
        gate,
        log: log.log,
        metrics,
        maxAttempts: 3,
        retryBaseMs: 100,
        retryMaxMs: 1000,
        claimTtlMs: 10_000,
        worker: "test:1",
        unusedClaims: createUnusedClaims(),
        random: Math.random,
        ...overrides,
      };
    },
  };
}

/** A notification with one pending channel, as the processor leaves it, and its work item. */
export async function workItem(
  database: Database,
  options: { channel?: Channel; to?: string; priority?: Priority; userId?: string; category?: string } = {},
): Promise<WorkItem> {
  const id = randomUUID();
  const channel = options.channel ?? "email";
  const priority = options.priority ?? "transactional";
  const userId = options.userId ?? "u1";
  const category = options.category ?? "account";
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'c', ${userId}, ${category}, 'welcome', ${priority}, ${database.sql.json({ name: "Ada" })}, ${id}, 'h', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, ${channel}, 'pending')`;
  return {
    notification_id: id,
    channel,
    priority,
    user_id: userId,
    category,
    to: options.to ?? "ada@example.com",
    subject: "Hi",
    body: "<p>Hi</p>",
    attempt: 0,
  };
}

export async function channelRow(database: Database, item: WorkItem) {
  const [row] = await database.sql<
    { status: string; reason: string | null; provider: string | null; provider_id: string | null; attempts: number }[]
  >`select status, reason, provider, provider_id, attempts from notification_channels
    where notification_id = ${item.notification_id} and channel = ${item.channel}`;
  return row;
}

export async function statusHistory(database: Database, item: WorkItem) {
  return database.sql<{ status: string; reason: string | null; attempt: number; at: Date }[]>`
    select status, reason, attempt, at from channel_status_events
    where notification_id = ${item.notification_id} and channel = ${item.channel} order by id`;
}

/** Every dead letter of a notification, oldest first. */
export async function deadLetters(bus: Bus, notificationId: string): Promise<DeadLetter[]> {
  const info = await bus.jsm.streams.info(bus.streams.dlq);
  const letters: DeadLetter[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const message = await bus.jsm.streams.getMessage(bus.streams.dlq, { seq }).catch(() => null);
    const letter = message?.json<DeadLetter>();
    if (letter?.item.notification_id === notificationId) letters.push(letter);
  }
  return letters;
}

/** What a fake provider's server answers to one request. */
export interface FakeAnswer {
  status: number;
  delayMs?: number;
  retryAfterSeconds?: number;
}

export interface FakeProviderServer {
  url: string;
  /** Requests received, in order, with the `to` they were for. */
  received: Array<{ to: string; at: number }>;
  /** How the next requests are answered, chosen per `to`. */
  answer(fn: (to: string) => FakeAnswer): void;
  close(): Promise<void>;
}

/**
 * A provider's HTTP API in miniature: POST /messages {"to", "body"} answers 202 with
 * {"id"}, or the status the test chose, after an optional delay. Held requests are released on
 * close, so a test never waits for them.
 */
export async function startFakeProviderServer(t: Tap): Promise<FakeProviderServer> {
  const received: FakeProviderServer["received"] = [];
  let choose: (to: string) => FakeAnswer = () => ({ status: 202 });
  const held = new Set<ServerResponse>();
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const { to } = JSON.parse(body) as { to: string };
      const answer = choose(to);
      held.add(response);
      setTimeout(() => {
        held.delete(response);
        if (response.destroyed) return;
        if (answer.status < 300) received.push({ to, at: Date.now() });
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (answer.retryAfterSeconds !== undefined) headers["retry-after"] = String(answer.retryAfterSeconds);
        response.writeHead(answer.status, headers);
        response.end(JSON.stringify(answer.status < 300 ? { id: randomUUID() } : { error: `status ${answer.status}` }));
      }, answer.delayMs ?? 0).unref();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const close = () =>
    new Promise<void>((resolve) => {
      for (const response of held) response.destroy();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  t.teardown(close);
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answer: (fn) => {
      choose = fn;
    },
    close,
  };
}

/**
 * A Provider over the fake server, classifying like the real ones: 2xx accepted; 408, 429 and 5xx transient with their status and Retry-After; 404 and
 * 410 mean the address is gone (as the Web Push provider says of a subscription); other 4xx
 * permanent; no answer within the timeout, or no connection, transient without a status.
 */
export function fakeProvider(options: { name: string; channel: Channel; url: string; timeoutMs?: number }): Provider {
  return {
    name: options.name,
    channel: options.channel,
    async send(message: OutboundMessage): Promise<ProviderAnswer> {
      let response: Response;
      try {
        response = await fetch(`${options.url}/messages`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ to: message.to, body: message.body }),
          signal: AbortSignal.timeout(options.timeoutMs ?? 2000),
        });
      } catch (error) {
        return { outcome: "transient", reason: `${options.name} unreachable: ${(error as Error).name}` };
      }
      const status = response.status;
      const body = (await response.json()) as { id?: string; error?: string };
      if (status < 300) return { outcome: "accepted", providerId: body.id ?? "" };
      const reason = `${options.name} ${status}: ${body.error}`;
      if (status === 408 || status === 429 || status >= 500) {
        const retryAfter = Number(response.headers.get("retry-after"));
        return {
          outcome: "transient",
          reason,
          status,
          ...(response.headers.has("retry-after") ? { retryAfterMs: retryAfter * 1000 } : {}),
        };
      }
      return {
        outcome: "permanent",
        reason,
        status,
        ...(status === 404 || status === 410 ? { addressGone: true } : {}),
      };
    },
  };
}
