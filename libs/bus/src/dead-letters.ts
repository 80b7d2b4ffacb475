import { randomUUID } from "node:crypto";
import { AckPolicy, DeliverPolicy, JetStreamApiError, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { nanos } from "@nats-io/nats-core";
import type { Channel, DeadLetter } from "@notify/core";
import type { Bus } from "./connection.js";
import { subjectName } from "./topology.js";

/** A dead letter as stored: its stream sequence and time, and the message. */
export interface StoredLetter {
  seq: number;
  time: Date;
  letter: DeadLetter;
}

/**
 * A start time as JetStream takes it: the server reads it as nanoseconds since 1970 in a signed
 * 64-bit integer, which wraps before 1678 and after 2261 (a start in the year 9999 would begin at
 * the first message). No message is stored outside 1970-2261, so clamping changes no answer.
 */
const startTime = (date: Date) => new Date(Math.min(Math.max(date.getTime(), 0), Date.UTC(2261, 0, 1))).toISOString();

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
        ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: startTime(options.since) }
        : { deliver_policy: DeliverPolicy.All }),
  });
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  let read = 0;
  try {
    let left = Math.min(limit, (await consumer.info(true)).num_pending);
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
  } finally {
    // Left alone it would linger five minutes (the client's inactive threshold), each reader
    // one more toward the stream's consumer limit.
    consumer.delete().catch(() => {});
  }
}

/**
 * When a stored message was stored, to the millisecond (floored, as JetStream compares a start
 * time with it). From the exact nanoseconds: as a double (`info.timestampNanos`) they are rounded
 * to 256 ns, which moves a message stored in the last 192 ns of a millisecond into the next one.
 */
export const storedAt = (msg: Pick<JsMsg, "timestampNanos">) => new Date(Number(msg.timestampNanos / 1_000_000n));

/** The dead letters from `since` on, for one channel's subject when asked, oldest first, one at a time. */
export async function* streamDeadLetters(
  bus: Bus,
  options: { channel?: Channel; since?: Date },
): AsyncGenerator<StoredLetter> {
  const subject = options.channel ? bus.subjects.dlq(options.channel) : subjectName(bus.naming, "notify.dlq.*");
  const since = options.since ? { since: options.since } : {};
  for await (const msg of readSubject(bus, bus.streams.dlq, subject, since)) {
    yield { seq: msg.seq, time: storedAt(msg), letter: msg.json<DeadLetter>() };
  }
}

/**
 * Reads the dead letters, from `since` on and for one channel's subject when asked. `keep`
 * filters as the letters arrive, so only the kept ones are held in memory. Oldest first.
 */
export async function readDeadLetterStream(
  bus: Bus,
  options: { channel?: Channel; since?: Date; keep?: (letter: StoredLetter) => boolean },
): Promise<StoredLetter[]> {
  const letters: StoredLetter[] = [];
  for await (const stored of streamDeadLetters(bus, options)) {
    if (options.keep === undefined || options.keep(stored)) letters.push(stored);
  }
  return letters;
}

/**
 * How many messages of `stream` on `subject` there are from the sequence `seq` on, or from the
 * time `time` on, as JetStream counts them for a consumer starting there: a consumer is made
 * (in memory, acknowledging nothing) for its count and deleted. Nothing is delivered.
 */
async function countFrom(
  jsm: JetStreamManager,
  stream: string,
  subject: string,
  from: { seq: number } | { time: Date },
): Promise<number> {
  const name = `count_${randomUUID().replaceAll("-", "")}`;
  const info = await jsm.consumers.add(stream, {
    name,
    filter_subject: subject,
    ack_policy: AckPolicy.None,
    mem_storage: true,
    num_replicas: 1,
    // Gone on its own should the delete below not arrive.
    inactive_threshold: nanos(10_000),
    ...("seq" in from
      ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, from.seq) }
      : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: startTime(from.time) }),
  });
  jsm.consumers.delete(stream, name).catch(() => {});
  return info.num_pending;
}

/**
 * One page of the dead letters between `since` and `until` (both included, to the millisecond),
 * for one channel's subject when asked, newest first: the `limit` letters after the `offset`
 * newest, and how many letters the window holds. Only the page is read: the window is counted,
 * and where the page starts is found by halving the sequence range (one count each), so a page
 * costs about log2(stream length) counts and `limit` messages, however many letters there are.
 * Letters stored while it reads may shift the page by as many places.
 */
export async function pageDeadLetterStream(
  bus: Bus,
  options: { channel?: Channel; since?: Date; until?: Date; offset: number; limit: number },
): Promise<{ letters: StoredLetter[]; total: number }> {
  const stream = bus.streams.dlq;
  const subject = options.channel ? bus.subjects.dlq(options.channel) : subjectName(bus.naming, "notify.dlq.*");
  // With the JetStream client's timeout (ingest's publish timeout), not the manager's longer one:
  // a request waiting on NATS answers 503 as soon as a publish would.
  const jsm = await bus.js.jetstreamManager(false);
  const { state } = await jsm.streams.info(stream);
  // Stored after the window: counted from the first millisecond after `until`.
  const after = options.until
    ? await countFrom(jsm, stream, subject, { time: new Date(options.until.getTime() + 1) })
    : 0;
  const inWindowFrom = async (seq: number) => (await countFrom(jsm, stream, subject, { seq })) - after;
  const total = Math.max(
    0,
    options.since
      ? (await countFrom(jsm, stream, subject, { time: options.since })) - after
      : await inWindowFrom(state.first_seq),
  );
  const wanted = Math.min(options.offset + options.limit, total);
  if (wanted <= options.offset) return { letters: [], total };
  // The last sequence from which the window still holds `wanted` letters: the oldest of the page.
  let [low, high] = [Math.max(1, state.first_seq), Math.max(1, state.last_seq)];
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if ((await inWindowFrom(middle)) >= wanted) low = middle;
    else high = middle - 1;
  }
  const letters: StoredLetter[] = [];
  for await (const msg of readSubject(bus, stream, subject, { fromSeq: low, limit: wanted - options.offset })) {
    const stored = { seq: msg.seq, time: storedAt(msg), letter: msg.json<DeadLetter>() };
    if (options.until && stored.time > options.until) break;
    letters.push(stored);
  }
  return { letters: letters.reverse(), total };
}

/**
 * At most `limit` dead letters `keep` keeps, oldest first, from the sequence `fromSeq` on (else
 * from `since` on) up to `until`, for one channel's subject when asked: a batch of a selection
 * too large to hold at once. At most `scanLimit` messages are looked at, so a selection that
 * matches few letters of a long stream answers in bounded time too. `remaining` counts the
 * messages after the batch that were not looked at (`keep` not applied to them), and `nextSeq`
 * is where they start: null, and 0 remaining, when the batch holds the rest of the selection.
 */
export async function readDeadLetterBatch(
  bus: Bus,
  options: {
    channel?: Channel;
    since?: Date;
    until?: Date;
    fromSeq?: number;
    limit: number;
    scanLimit?: number;
    keep?: (letter: StoredLetter) => boolean;
  },
): Promise<{ letters: StoredLetter[]; remaining: number; nextSeq: number | null }> {
  const subject = options.channel ? bus.subjects.dlq(options.channel) : subjectName(bus.naming, "notify.dlq.*");
  const letters: StoredLetter[] = [];
  const start =
    options.fromSeq !== undefined ? { fromSeq: options.fromSeq } : options.since ? { since: options.since } : {};
  const scanLimit = options.scanLimit ?? Number.POSITIVE_INFINITY;
  let scanned = 0;
  for await (const msg of readSubject(bus, bus.streams.dlq, subject, start)) {
    const stored = { seq: msg.seq, time: storedAt(msg), letter: msg.json<DeadLetter>() };
    // Stored in time order: nothing after the first letter past `until` is selected.
    if (options.until && stored.time > options.until) break;
    if (options.keep === undefined || options.keep(stored)) {
      if (letters.length >= options.limit) return { letters, remaining: msg.info.pending + 1, nextSeq: msg.seq };
      letters.push(stored);
    }
    if (++scanned >= scanLimit && msg.info.pending > 0) {
      return { letters, remaining: msg.info.pending, nextSeq: msg.seq + 1 };
    }
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
