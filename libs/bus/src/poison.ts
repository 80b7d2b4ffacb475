import type { JsMsg } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { extractHeaders, injectHeaders } from "@notify/telemetry";
import type { Bus } from "./connection.js";
import { readSubject, storedAt } from "./dead-letters.js";
import { subjectName } from "./topology.js";

/**
 * A message whose bytes cannot be decoded or validated: no retry changes them, so it is set
 * aside (its raw bytes and this reason, on the poison subject) and acknowledged.
 */
export class PoisonMessageError extends Error {
  override name = "PoisonMessageError";
}

// Stateless between calls (no stream option): one decoder serves every message.
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses a message as JSON and validates it: `problem` answers null for a valid value, else
 * what is wrong with it. Throws PoisonMessageError for bytes that are not JSON or a value that
 * is not valid.
 */
export function decodeJson<T>(msg: Pick<JsMsg, "data">, problem: (value: unknown) => string | null): T {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(msg.data));
  } catch (error) {
    throw new PoisonMessageError(`not UTF-8 JSON: ${(error as Error).message}`);
  }
  const found = problem(value);
  if (found !== null) throw new PoisonMessageError(`invalid: ${found}`);
  return value as T;
}

/** Headers a poison message carries: why it was set aside and where it was read from. */
export const POISON_HEADERS = {
  reason: "Notify-Poison-Reason",
  stream: "Notify-Source-Stream",
  subject: "Notify-Source-Subject",
  seq: "Notify-Source-Seq",
  consumer: "Notify-Source-Consumer",
  deliveries: "Notify-Source-Deliveries",
} as const;

/**
 * The poison subject of a stream: `notify.dlq.poison.<stream>`, kept by the dead-letter stream
 * but outside the `notify.dlq.<channel>` dead letters (their readers and the replay tool never
 * meet raw bytes).
 */
export const poisonSubject = (bus: Pick<Bus, "naming">, stream: string) =>
  subjectName(bus.naming, `notify.dlq.poison.${stream}`);

/**
 * Stores a poison message's raw bytes on its stream's poison subject, with the reason and its
 * origin as headers. Deduplicated by the origin's stream sequence, so a redelivery after a crash
 * between this and the ack stores it once. Throws when it was not stored (the caller does not ack).
 */
export async function setAsidePoison(bus: Bus, msg: JsMsg, consumer: string, reason: string): Promise<void> {
  const h = headers();
  h.set(POISON_HEADERS.reason, reason.slice(0, 1024));
  h.set(POISON_HEADERS.stream, msg.info.stream);
  h.set(POISON_HEADERS.subject, msg.subject);
  h.set(POISON_HEADERS.seq, String(msg.seq));
  h.set(POISON_HEADERS.consumer, consumer);
  h.set(POISON_HEADERS.deliveries, String(msg.info.deliveryCount));
  // The poison keeps the trace it came in (nothing when tracing is off).
  injectHeaders(h, extractHeaders(msg.headers));
  await bus.js.publish(poisonSubject(bus, msg.info.stream), msg.data, {
    msgID: `poison:${msg.info.stream}:${msg.seq}`,
    headers: h,
  });
}

/** A poison message as stored, for operators (`notify dlq poison`). */
export interface StoredPoison {
  seq: number;
  time: Date;
  reason: string;
  stream: string;
  subject: string;
  sourceSeq: number;
  consumer: string;
  deliveries: number;
  data: Uint8Array;
}

/** Every poison message kept (at most `limit`, 1000 by default), oldest first; changes nothing. */
export async function readPoisonMessages(bus: Bus, options: { limit?: number } = {}): Promise<StoredPoison[]> {
  const subject = subjectName(bus.naming, "notify.dlq.poison.>");
  const found: StoredPoison[] = [];
  for await (const msg of readSubject(bus, bus.streams.dlq, subject, { limit: options.limit ?? 1000 })) {
    const h = msg.headers;
    found.push({
      seq: msg.seq,
      time: storedAt(msg),
      reason: h?.get(POISON_HEADERS.reason) ?? "",
      stream: h?.get(POISON_HEADERS.stream) ?? "",
      subject: h?.get(POISON_HEADERS.subject) ?? "",
      sourceSeq: Number(h?.get(POISON_HEADERS.seq) ?? 0),
      consumer: h?.get(POISON_HEADERS.consumer) ?? "",
      deliveries: Number(h?.get(POISON_HEADERS.deliveries) ?? 0),
      data: msg.data,
    });
  }
  return found;
}
