import { DeliverPolicy, JetStreamApiError, type JsMsg } from "@nats-io/jetstream";
import type { Channel, DeadLetter } from "@notify/core";
import type { Bus } from "./index.js";
import { subjectName } from "./topology.js";

/** A dead letter as stored: its stream sequence and time, and the message. */
export interface StoredLetter {
  seq: number;
  time: Date;
  letter: DeadLetter;
}

/**
 * The messages of `stream` on `subject` (wildcards too), oldest first, read with an ordered
 * consumer (ephemeral: it changes nothing on the server), from `since` on, at most `limit`.
 */
export async function* readSubject(
  bus: Bus,
  stream: string,
  subject: string,
  options: { since?: Date; limit?: number } = {},
): AsyncGenerator<JsMsg> {
  const consumer = await bus.js.consumers.get(stream, {
    filter_subjects: subject,
    ...(options.since
      ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: options.since.toISOString() }
      : { deliver_policy: DeliverPolicy.All }),
  });
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  let read = 0;
  let left = Math.min(limit, (await consumer.info()).num_pending);
  while (left > 0) {
    const batch = await consumer.fetch({ max_messages: Math.min(left, 256), expires: 2000 });
    let got = 0;
    for await (const msg of batch) {
      got++;
      read++;
      left = Math.min(limit - read, msg.info.pending);
      yield msg;
      if (left <= 0) break;
    }
    if (got === 0) break;
  }
}

/** When a stored message was stored. */
export const storedAt = (msg: JsMsg) => new Date(Math.floor(msg.info.timestampNanos / 1e6));

/**
 * Reads the dead letters, from `since` on and for one channel's subject when asked. `keep`
 * filters as the letters arrive, so only the kept ones are held in memory. Oldest first.
 */
export async function readDeadLetterStream(
  bus: Bus,
  options: { channel?: Channel; since?: Date; keep?: (letter: StoredLetter) => boolean },
): Promise<StoredLetter[]> {
  const subject = options.channel ? bus.subjects.dlq(options.channel) : subjectName(bus.naming, "notify.dlq.*");
  const letters: StoredLetter[] = [];
  const since = options.since ? { since: options.since } : {};
  for await (const msg of readSubject(bus, bus.streams.dlq, subject, since)) {
    const stored = { seq: msg.seq, time: storedAt(msg), letter: msg.json<DeadLetter>() };
    if (options.keep === undefined || options.keep(stored)) letters.push(stored);
  }
  return letters;
}

/**
 * One dead letter by its stream sequence; null when there is none (never stored, or gone) or the
 * sequence holds a poison message (raw bytes, read with readPoisonMessages).
 */
export async function getDeadLetter(bus: Bus, seq: number): Promise<StoredLetter | null> {
  // JetStream's own answer (no such message, a sequence it refuses) means none; NATS out of reach
  // is thrown, so that a caller answers 503, not "no such letter".
  const message = await bus.jsm.streams.getMessage(bus.streams.dlq, { seq }).catch((error: unknown) => {
    if (error instanceof JetStreamApiError) return null;
    throw error;
  });
  if (!message || message.subject.startsWith(subjectName(bus.naming, "notify.dlq.poison."))) return null;
  return { seq, time: message.time, letter: message.json<DeadLetter>() };
}
