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
 * consumer (ephemeral: it changes nothing on the server), from `since` on (or from the sequence
 * `fromSeq` on, which then wins), at most `limit`.
 */
export async function* readSubject(
  bus: Bus,
  stream: string,
  subject: string,
  options: { since?: Date; fromSeq?: number; limit?: number } = {},
): AsyncGenerator<JsMsg> {
  const consumer = await bus.js.consumers.get(stream, {
    filter_subjects: subject,
    ...(options.fromSeq !== undefined
      ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: options.fromSeq }
      : options.since
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
 * At most `limit` dead letters `keep` keeps, oldest first, from the sequence `fromSeq` on (else
 * from `since` on), for one channel's subject when asked: a batch of a selection too large to
 * hold at once. `remaining` counts the messages after the batch that were not looked at (the
 * letter that did not fit and every one after it on the subject, `keep` not applied to them),
 * and `nextSeq` is where they start (null, and 0 remaining, when the batch holds the rest).
 */
export async function readDeadLetterBatch(
  bus: Bus,
  options: {
    channel?: Channel;
    since?: Date;
    fromSeq?: number;
    limit: number;
    keep?: (letter: StoredLetter) => boolean;
  },
): Promise<{ letters: StoredLetter[]; remaining: number; nextSeq: number | null }> {
  const subject = options.channel ? bus.subjects.dlq(options.channel) : subjectName(bus.naming, "notify.dlq.*");
  const letters: StoredLetter[] = [];
  const start =
    options.fromSeq !== undefined ? { fromSeq: options.fromSeq } : options.since ? { since: options.since } : {};
  for await (const msg of readSubject(bus, bus.streams.dlq, subject, start)) {
    const stored = { seq: msg.seq, time: storedAt(msg), letter: msg.json<DeadLetter>() };
    if (options.keep !== undefined && !options.keep(stored)) continue;
    if (letters.length >= options.limit) return { letters, remaining: msg.info.pending + 1, nextSeq: msg.seq };
    letters.push(stored);
  }
  return { letters, remaining: 0, nextSeq: null };
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

/**
 * getDeadLetter for a role that may only browse the stream (ingest): the first letter from `seq`
 * on, read with an ordered consumer, if it is the one at `seq`. Poison is on other subjects.
 */
export async function browseDeadLetter(bus: Bus, seq: number): Promise<StoredLetter | null> {
  const subject = subjectName(bus.naming, "notify.dlq.*");
  for await (const msg of readSubject(bus, bus.streams.dlq, subject, { fromSeq: seq, limit: 1 })) {
    if (msg.seq !== seq) return null;
    return { seq, time: storedAt(msg), letter: msg.json<DeadLetter>() };
  }
  return null;
}
