import { setTimeout as sleep } from "node:timers/promises";
import type { JsMsg } from "@nats-io/jetstream";
import { backoffMs } from "@notify/core";
import { extractHeaders, type Span, SpanKind, SpanStatusCode, tracingOn, withSpan } from "@notify/telemetry";
import { ensureTopology } from "./apply.js";
import type { Bus } from "./connection.js";
import { createOrderWatch, ORDER_DOUBT_MS } from "./order-doubt.js";
import { PoisonMessageError, setAsidePoison } from "./poison.js";

/** What a handler decides for a message. A retryable failure always carries a delay. */
export type Disposition = { ack: true } | { retryInMs: number } | { terminate: string };

export interface ConsumerRunnerOptions<T> {
  bus: Bus;
  stream: string;
  durable: string;
  /** Messages handled at once by this runner. */
  concurrency: number;
  /**
   * Turns the bytes into the value handled; throws PoisonMessageError (decodeJson does) for
   * bytes that cannot be decoded or validated. Those are set aside on the poison subject with
   * the reason and acknowledged: never retried, never handled.
   */
  decode(msg: JsMsg): T;
  /** Messages with the same key are handled one after another, in delivery order. */
  keyOf?: (value: T) => string;
  /**
   * How long a sign that a delivery may have come out of order keeps the runner's deliveries in
   * doubt (see createOrderWatch); ORDER_DOUBT_MS by default.
   */
  orderDoubtMs?: number;
  /**
   * `orderInDoubt`: an earlier message may still come after this one (within `orderDoubtMs` the
   * runner started while deliveries were unacknowledged, or saw one lost, taken elsewhere,
   * repeated or sent back).
   */
  handle(value: T, msg: JsMsg, delivery: { orderInDoubt: boolean }): Promise<Disposition>;
  onError(error: unknown, msg: JsMsg): void;
  /** A message was set aside as poison (after it was stored and acknowledged). */
  onPoison?(reason: string, msg: JsMsg): void;
  /** The consumer was lost, or could not be put back yet (logged by the app; the runner keeps trying). */
  onLost?(error: unknown): void;
}

export interface ConsumerRunner {
  /** Stops pulling, then waits for the messages in hand to finish. */
  stop(): Promise<void>;
  inFlight(): number;
  /** False while the runner has lost its consumer and is getting it back: readiness says so. */
  healthy(): boolean;
}

/**
 * How long a keyed runner retries a failed message in place before it sends it back to the
 * queue (where the next message of its key may pass it): longer than a dependency's failover.
 */
export const ORDERED_RETRY_MS = 60_000;

/** Backoff for handler crashes: exponential with jitter, capped, never a bare nak. */
export const crashBackoffMs = (deliveryCount: number) =>
  backoffMs(Math.min(deliveryCount, 10) + 1, 250, 30_000, 0, Math.random);

/**
 * Pulls from a durable consumer and settles every message through `handle`, at most
 * `concurrency` at once and in order per key, a failed message included. The client keeps pulling through outages; when the
 * consumer (or its stream) is gone, deleted by hand or lost by the server, the runner reports
 * itself unhealthy, puts the declared topology back (or, where its user may not, waits for the
 * setup job to), and is healthy again once the consumer
 * answers: it never idles while readiness says all is well.
 */
export async function runConsumer<T>(options: ConsumerRunnerOptions<T>): Promise<ConsumerRunner> {
  // Every message held (waiting for a slot, behind its key, or being handled) tells the server
  // it is in progress a few times per ack wait, so a short ack wait only ever redelivers the
  // work of a process that died.
  let heartbeatMs = 2000;
  const held = new Set<JsMsg>();
  let started: { lastDelivered: number; inHand: number } | undefined;
  const pull = async () => {
    const consumer = await options.bus.js.consumers.get(options.stream, options.durable);
    const info = await consumer.info(true);
    const ackWaitMs = (info.config.ack_wait ?? 30e9) / 1e6;
    heartbeatMs = Math.max(250, Math.floor(ackWaitMs / 3));
    started = { lastDelivered: info.delivered.consumer_seq, inHand: info.num_ack_pending };
    return consumer.consume({ max_messages: Math.max(options.concurrency, 8) });
  };
  let messages = await pull();
  const order = createOrderWatch(options.orderDoubtMs ?? ORDER_DOUBT_MS, Date.now, started);
  // Ticking only while a message is held: an idle consumer does not wake its process.
  let lastBeat = Date.now();
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  const beat = () => {
    if (held.size === 0) {
      clearInterval(heartbeat);
      heartbeat = undefined;
      return;
    }
    if (Date.now() - lastBeat < heartbeatMs) return;
    lastBeat = Date.now();
    for (const msg of held) msg.working();
  };
  const hold = (msg: JsMsg) => {
    held.add(msg);
    if (heartbeat !== undefined) return;
    // The first beat of a message held alone comes a whole interval after it arrived.
    if (held.size === 1) lastBeat = Date.now();
    heartbeat = setInterval(beat, 250);
    heartbeat.unref();
  };
  const chains = new Map<string, Promise<void>>();
  const inFlight = new Set<Promise<void>>();
  let slots = options.concurrency;
  let wake: (() => void) | undefined;
  let healthy = true;
  let recovering: Promise<void> | undefined;
  const stopped = new AbortController();
  const pause = (failures: number) =>
    sleep(Math.min(10_000, 500 * 2 ** failures), undefined, { signal: stopped.signal }).catch(() => {});

  // With tracing on, a message is handled inside a CONSUMER span, the child of the span that
  // published it (its traceparent header); with tracing off, nothing is read or allocated.
  const settle = (msg: JsMsg, value: T, doubtedOnArrival: boolean): Promise<void> =>
    tracingOn()
      ? withSpan(
          `${msg.subject} process`,
          {
            kind: SpanKind.CONSUMER,
            parent: extractHeaders(msg.headers),
            attributes: {
              "messaging.system": "nats",
              "messaging.operation.type": "process",
              "messaging.destination.name": msg.subject,
              "messaging.consumer.group.name": options.durable,
              "messaging.nats.stream": msg.info.stream,
              "messaging.nats.delivery_count": msg.info.deliveryCount,
            },
          },
          (span) => settleIn(msg, value, doubtedOnArrival, span),
        )
      : settleIn(msg, value, doubtedOnArrival, undefined);

  const settleIn = async (msg: JsMsg, value: T, doubtedOnArrival: boolean, span: Span | undefined) => {
    let disposition: Disposition;
    const started = Date.now();
    for (let failures = 0; ; failures++) {
      try {
        // Also in doubt when a sign came after it arrived: an earlier message of its key, ahead
        // of it here, was sent back.
        disposition = await options.handle(value, msg, { orderInDoubt: doubtedOnArrival || order.inDoubt() });
        break;
      } catch (error) {
        options.onError(error, msg);
        const delayMs = crashBackoffMs(msg.info.deliveryCount + failures);
        // Sent back to the queue, the message would be overtaken by the next one of its key. A
        // keyed runner keeps it in hand (the heartbeat keeps it its own) and tries it again, for
        // up to ORDERED_RETRY_MS; only then, or at stop(), does it go back.
        if (
          options.keyOf === undefined ||
          stopped.signal.aborted ||
          Date.now() - started + delayMs > ORDERED_RETRY_MS
        ) {
          disposition = { retryInMs: delayMs };
          break;
        }
        await sleep(delayMs, undefined, { signal: stopped.signal }).catch(() => {});
      }
    }
    // A plain ack, not a confirmed one: one lost in transit only brings the message back, which
    // every handler here finds done (routing's rows, the send guard's claim), and the runner
    // reads that redelivery as a sign of disorder. A confirmed ack is a request per message.
    if (span !== undefined) {
      span.setAttribute(
        "notify.disposition",
        "ack" in disposition ? "ack" : "retryInMs" in disposition ? "retry" : "terminate",
      );
      if ("terminate" in disposition) span.setStatus({ code: SpanStatusCode.ERROR, message: disposition.terminate });
    }
    if ("ack" in disposition) msg.ack();
    else if ("retryInMs" in disposition) {
      order.sentBack();
      msg.nak(disposition.retryInMs);
    } else msg.term(disposition.terminate);
  };

  // Stored with its reason before the ack; if storing fails it comes back later (never lost).
  const setAside = async (msg: JsMsg, reason: string) => {
    try {
      await setAsidePoison(options.bus, msg, options.durable, reason);
    } catch (error) {
      options.onError(error, msg);
      msg.nak(crashBackoffMs(msg.info.deliveryCount));
      return;
    }
    msg.ack();
    options.onPoison?.(reason, msg);
  };

  // A value whose key cannot be read cannot be put in order with the rest of its key: it is set
  // aside like bytes that cannot be decoded, never held with its slot taken.
  const decoded = (msg: JsMsg): { value: T; key: string | undefined } | { poison: string } => {
    let value: T;
    try {
      value = options.decode(msg);
    } catch (error) {
      return { poison: error instanceof PoisonMessageError ? error.message : `undecodable: ${String(error)}` };
    }
    try {
      return { value, key: options.keyOf?.(value) };
    } catch (error) {
      return { poison: `no key: ${String(error)}` };
    }
  };

  const lost = (error: unknown) => {
    if (healthy) options.onLost?.(error);
    healthy = false;
  };

  // The declared topology is put back (or checked, see ensureTopology) until the consumer answers; then the pull starts afresh
  // (the old one would only notice at its next expiry, up to 30 s later).
  const recover = () => {
    recovering ??= (async () => {
      for (let failures = 0; !stopped.signal.aborted; failures++) {
        try {
          await ensureTopology(options.bus);
          await options.bus.jsm.consumers.info(options.stream, options.durable);
          await messages.close();
          return;
        } catch (error) {
          options.onLost?.(error);
        }
        await pause(failures);
      }
    })().finally(() => {
      recovering = undefined;
    });
  };

  const watch = (current: typeof messages) => {
    void (async () => {
      for await (const status of current.status()) {
        if (["consumer_deleted", "consumer_not_found", "stream_not_found"].includes(status.type)) {
          lost(new Error(`${options.stream}/${options.durable}: ${status.type}`));
          recover();
        }
      }
    })().catch(() => {});
  };

  const drain = async (current: typeof messages) => {
    for await (const msg of current) {
      hold(msg);
      // In arrival order, before anything waits: the delivery sequence is read as it came.
      const orderInDoubt = order.delivered(msg.info);
      while (slots === 0) await new Promise<void>((resolve) => (wake = resolve));
      slots--;
      const read = decoded(msg);
      const key = "value" in read ? read.key : undefined;
      const previous = key === undefined ? undefined : chains.get(key);
      const task: Promise<void> = (previous ?? Promise.resolve())
        .then(() => ("value" in read ? settle(msg, read.value, orderInDoubt) : setAside(msg, read.poison)))
        .finally(() => {
          held.delete(msg);
          slots++;
          inFlight.delete(task);
          if (key !== undefined && chains.get(key) === task) chains.delete(key);
          wake?.();
          wake = undefined;
        });
      inFlight.add(task);
      if (key !== undefined) chains.set(key, task);
    }
  };

  const loop = (async () => {
    watch(messages);
    while (!stopped.signal.aborted) {
      try {
        await drain(messages);
      } catch (error) {
        lost(error);
      }
      if (stopped.signal.aborted) return;
      // Ended without stop(): closed by a recovery, or lost in a way the client gave up on.
      if (!recovering && healthy) lost(new Error(`the pull from ${options.stream}/${options.durable} ended`));
      for (let failures = 0; !stopped.signal.aborted; failures++) {
        try {
          messages = await pull();
          order.restarted();
          watch(messages);
          healthy = true;
          break;
        } catch (error) {
          lost(error);
          recover();
          await pause(failures);
        }
      }
    }
  })();

  return {
    inFlight: () => inFlight.size,
    healthy: () => healthy,
    async stop() {
      stopped.abort();
      await messages.close();
      wake?.();
      await loop.catch(() => {});
      await recovering;
      await Promise.allSettled([...inFlight]);
      clearInterval(heartbeat);
      heartbeat = undefined;
    },
  };
}
