import { type Bus, type ConsumerRunner, decodeJson, runConsumer } from "@notify/bus";
import { decideWebhookAttempt } from "@notify/core";
import { claimDelivery, type Database, type DueDelivery, deferDelivery, recordWebhookAttempt } from "@notify/db";
import { DURATION_BUCKETS, type MetricsRegistry } from "@notify/http";
import type { Logger } from "@notify/log";
import { postEvent } from "./post.js";

export interface SenderOptions {
  /** Posts in flight in this process, all endpoints together. */
  concurrency: number;
  /**
   * Posts in flight in this process to one endpoint; as many again, or an eighth of
   * `concurrency` if more, wait in line for them, and the rest are put back for a second: a slow
   * endpoint never holds more of the consumer's slots.
   */
  perEndpoint: number;
  timeoutMs: number;
  /** Seconds to wait after each failed attempt (the last entry's failure makes it dead). */
  schedule: readonly number[];
  /** An endpoint failing every attempt for this long is disabled. */
  disableAfterMs: number;
  allowPrivateNetworks: boolean;
  random?: () => number;
}

/** How long a delivery whose endpoint is busy waits before it is tried again (no attempt spent). */
const BUSY_ENDPOINT_DELAY_MS = 1000;

/**
 * Posts in flight per endpoint: at most `perEndpoint` at once, and at most `queue` more waiting
 * in this process for a slot, in arrival order; `acquire` answers false beyond that, and the
 * delivery is put back in Postgres for a second. So a slow endpoint holds at most
 * `perEndpoint + queue` of the consumer's slots, and a fast one is fed without a round trip.
 */
export function endpointSlots(perEndpoint: number, queue: number) {
  const active = new Map<string, number>();
  const waiting = new Map<string, Array<() => void>>();
  return {
    async acquire(endpoint: string): Promise<boolean> {
      const busy = active.get(endpoint) ?? 0;
      if (busy < perEndpoint) {
        active.set(endpoint, busy + 1);
        return true;
      }
      const line = waiting.get(endpoint) ?? [];
      if (line.length >= queue) return false;
      waiting.set(endpoint, line);
      // The slot is handed over by release, which keeps the count as it is.
      await new Promise<void>((resolve) => line.push(resolve));
      return true;
    },
    release(endpoint: string): void {
      const line = waiting.get(endpoint);
      const next = line?.shift();
      if (line !== undefined && line.length === 0) waiting.delete(endpoint);
      if (next !== undefined) {
        next();
        return;
      }
      const left = (active.get(endpoint) ?? 1) - 1;
      if (left <= 0) active.delete(endpoint);
      else active.set(endpoint, left);
    },
  };
}

/**
 * One message of NOTIFY_WEBHOOKS: which attempt of which run of which delivery. A message without
 * `run` (as a dispatcher of an earlier version publishes it during an upgrade) is of the first run, 0.
 */
type Attempt = Omit<DueDelivery, "message_id" | "run"> & { run?: number };

const deliveryProblem = (value: unknown): string | null => {
  const d = value as Partial<Attempt> | null;
  if (typeof d !== "object" || d === null) return "not an object";
  if (typeof d.endpoint_id !== "string" || d.endpoint_id === "") return "endpoint_id is not a string";
  if (!Number.isSafeInteger(d.event_id) || (d.event_id as number) < 1) return "event_id is not a positive integer";
  if (!Number.isSafeInteger(d.attempt) || (d.attempt as number) < 1) return "attempt is not a positive integer";
  if (d.run !== undefined && (!Number.isSafeInteger(d.run) || d.run < 0)) return "run is not a non-negative integer";
  return null;
};

export function createWebhookMetrics(registry: MetricsRegistry) {
  return {
    attempts: registry.counter(
      "notify_webhook_attempts_total",
      "Posts to webhook endpoints by endpoint and result (delivered, failed)",
      ["endpoint", "result"],
    ),
    seconds: registry.histogram(
      "notify_webhook_post_duration_seconds",
      "Duration of posts to webhook endpoints",
      DURATION_BUCKETS,
      ["endpoint"],
    ),
    disabled: registry.counter(
      "notify_webhook_endpoints_disabled_total",
      "Endpoints disabled after failing every attempt for too long",
      ["endpoint"],
    ),
  };
}

/**
 * The outbound webhooks' senders: each message on NOTIFY_WEBHOOKS is one attempt of one delivery
 * (endpoint, event). A sender claims the attempt in Postgres (a repeated message claims nothing),
 * posts the event signed, and records the answer with what follows: delivered, the next attempt's
 * time (the dispatcher publishes it then), or dead. The message is acknowledged in every case:
 * a retry waits in Postgres, never in the stream, so an endpoint that is down holds no slot of
 * the consumer, and one that is slow holds at most a few of this process's (endpointSlots).
 */
export async function startWebhookSender(
  deps: { bus: Bus; database: Database; log: Logger; metrics: ReturnType<typeof createWebhookMetrics> },
  options: SenderOptions,
): Promise<ConsumerRunner> {
  const slots = endpointSlots(options.perEndpoint, Math.max(options.perEndpoint, Math.floor(options.concurrency / 8)));
  const random = options.random ?? Math.random;
  return runConsumer<Attempt>({
    bus: deps.bus,
    stream: deps.bus.streams.webhooks,
    durable: "webhook-sender",
    concurrency: options.concurrency,
    decode: (msg) => decodeJson(msg, deliveryProblem),
    async handle(message, msg) {
      const delivery = {
        endpointId: message.endpoint_id,
        eventId: message.event_id,
        run: message.run ?? 0,
        attempt: message.attempt,
      };
      if (!(await slots.acquire(delivery.endpointId))) {
        await deferDelivery(deps.database, delivery, BUSY_ENDPOINT_DELAY_MS);
        return { ack: true };
      }
      try {
        const claimed = await claimDelivery(deps.database, { ...delivery, redelivered: msg.info.deliveryCount > 1 });
        if (claimed === undefined || claimed === "disabled") return { ack: true };
        const started = performance.now();
        const answer = await postEvent(claimed, {
          timeoutMs: options.timeoutMs,
          allowPrivateNetworks: options.allowPrivateNetworks,
        });
        const latencyMs = Math.round(performance.now() - started);
        const now = Date.now();
        const decision = decideWebhookAttempt({
          answer,
          attempt: delivery.attempt,
          now,
          schedule: options.schedule,
          random,
        });
        const { disabled } = await recordWebhookAttempt(deps.database, {
          ...delivery,
          statusCode: answer.statusCode,
          latencyMs,
          error: answer.ok ? null : answer.error,
          next:
            decision.kind === "retry"
              ? { kind: "retry", at: new Date(decision.atMs) }
              : decision.kind === "dead"
                ? { kind: "dead", reason: decision.reason }
                : { kind: "delivered" },
          disableFailingSince: new Date(now - options.disableAfterMs),
        });
        deps.metrics.attempts.inc({ endpoint: delivery.endpointId, result: answer.ok ? "delivered" : "failed" });
        deps.metrics.seconds.observe({ endpoint: delivery.endpointId }, latencyMs / 1000);
        if (disabled) {
          deps.metrics.disabled.inc({ endpoint: delivery.endpointId });
          deps.log.warn(
            { endpoint_id: delivery.endpointId, client_id: claimed.clientId },
            "webhook endpoint disabled: every attempt failed for too long",
          );
        } else if (decision.kind === "dead") {
          deps.log.warn(
            { endpoint_id: delivery.endpointId, event_id: delivery.eventId, reason: decision.reason },
            "webhook delivery dead",
          );
        }
        return { ack: true };
      } finally {
        slots.release(delivery.endpointId);
      }
    },
    onError: (error) => deps.log.warn({ err: error }, "webhook delivery failed; will retry"),
  });
}
