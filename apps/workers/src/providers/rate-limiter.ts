import { isBucketMissing, isWrongLastSequence, jsonBytes, type KV } from "@notify/bus";
import { type LaneBuckets, type LaneCounts, type LaneRates, type Priority, takeForLanes } from "@notify/core";
import type { Logger } from "@notify/log";

export interface RateLimiter {
  /**
   * Resolves once `count` sends of `lane` may go to the provider, with the time (ms) they waited
   * for a spent rate: 0 when the bucket's first answer had their tokens, however long it took.
   */
  acquire(lane: Priority, count: number): Promise<number>;
  /** Sends of this lane waiting for a token in this process, a request for it in flight included. */
  waiting(lane: Priority): number;
  /**
   * Whether this lane's rate is spent for now: the bucket's last answer left sends of it without
   * a token, and they still wait. A send merely waiting for that answer does not count: the
   * bucket may well have its token.
   */
  spent(lane: Priority): boolean;
  /** Fails every waiting acquire: their work goes back to the queue. */
  close(): void;
  /** The rates it shares the provider's limit by (its reports show them). */
  readonly rates: LaneRates;
}

/** The process is shutting down: the waiting send goes back to the queue. */
export class LimiterClosed extends Error {
  constructor() {
    super("rate limiter closed");
    this.name = "LimiterClosed";
  }
}

interface Waiter {
  lane: Priority;
  remaining: number;
  since: number;
  /** An answer of the bucket left it without its tokens: it waits for a spent rate. */
  starved: boolean;
  resolve(waitedMs: number): void;
  reject(error: Error): void;
}

const decoder = new TextDecoder();

/**
 * The token buckets of one provider, shared by every worker process (the
 * aggregate rate stays within the provider's limit however many workers run). The state lives
 * under one key of the `notify_rate` bucket and moves by compare-and-set, so two processes can
 * never spend the same token. Waiting sends of this process are served together, transactional
 * first, in one round trip; what cannot be served waits for the next token here, in the pool's
 * bounded in-flight slots, while the rest of the backlog stays in the queue.
 *
 * While the bucket is gone and cannot be put back (BucketMissingError: a role that may not
 * create it waits for the setup job), the process keeps the provider's buckets itself, from the
 * last state it read, and asks for the shared bucket again every `recheckMs`: sends go on at the
 * provider's rate for this process, as after any loss of the bucket, instead of all waiting for
 * it. Said once when it starts and once when the shared bucket answers again. Any other failure
 * of the bucket fails the waiting sends: their work goes back to the queue.
 */
export function createRateLimiter(options: {
  kv: KV;
  key: string;
  rates: LaneRates;
  log?: Logger;
  recheckMs?: number;
}): RateLimiter {
  const waiters: Record<Priority, Waiter[]> = { transactional: [], promotional: [] };
  const short: Record<Priority, boolean> = { transactional: false, promotional: false };
  let cached: { state: LaneBuckets; revision: number } | undefined;
  /** The buckets this process keeps while the shared one is missing, and when to ask for it again. */
  let alone: { state: LaneBuckets; recheckAt: number } | undefined;
  const recheckMs = options.recheckMs ?? 1000;
  let pumping = false;
  let closed = false;
  let wake: (() => void) | undefined;

  async function read(): Promise<{ state: LaneBuckets; revision: number }> {
    const entry = await options.kv.get(options.key);
    if (entry?.operation !== "PUT") return { state: { reserved: 0, shared: 0 }, revision: entry?.revision ?? 0 };
    return { state: JSON.parse(decoder.decode(entry.value)) as LaneBuckets, revision: entry.revision };
  }

  function takeAlone(wanted: LaneCounts) {
    if (alone === undefined) {
      alone = { state: cached?.state ?? { reserved: 0, shared: 0 }, recheckAt: 0 };
      options.log?.warn(
        { provider: options.key },
        "the shared token buckets (notify_rate) are missing: this process keeps the provider's rate on its own until they are back",
      );
    }
    // Entered, or the shared bucket asked for again and still missing: the next ask is due later.
    if (Date.now() >= alone.recheckAt) alone.recheckAt = Date.now() + recheckMs;
    const result = takeForLanes(alone.state, Date.now(), wanted, options.rates);
    alone.state = result.state;
    return result;
  }

  async function takeShared(wanted: LaneCounts) {
    for (;;) {
      const current = cached ?? (await read());
      const result = takeForLanes(current.state, Date.now(), wanted, options.rates);
      if (result.granted.transactional + result.granted.promotional === 0) {
        cached = current;
        return result;
      }
      const value = jsonBytes(result.state);
      try {
        const revision =
          current.revision === 0
            ? await options.kv.create(options.key, value)
            : await options.kv.update(options.key, value, current.revision);
        cached = { state: result.state, revision };
        return result;
      } catch (error) {
        // Another process spent tokens since: read its state and compute again.
        if (!isWrongLastSequence(error)) throw error;
        cached = undefined;
      }
    }
  }

  async function take(wanted: LaneCounts) {
    if (alone !== undefined && Date.now() < alone.recheckAt) return takeAlone(wanted);
    try {
      const result = await takeShared(wanted);
      if (alone !== undefined) {
        alone = undefined;
        options.log?.info({ provider: options.key }, "the shared token buckets (notify_rate) are back");
      }
      return result;
    } catch (error) {
      if (!isBucketMissing(error)) throw error;
      const result = takeAlone(wanted);
      // The bucket put back later starts afresh: its state is read again then.
      cached = undefined;
      return result;
    }
  }

  function serve(lane: Priority, granted: number) {
    const queue = waiters[lane];
    let left = granted;
    while (left > 0 && queue.length > 0) {
      const waiter = queue[0] as Waiter;
      const used = Math.min(left, waiter.remaining);
      waiter.remaining -= used;
      left -= used;
      if (waiter.remaining === 0) {
        queue.shift();
        waiter.resolve(waiter.starved ? Date.now() - waiter.since : 0);
      }
    }
  }

  const wanted = (lane: Priority) => waiters[lane].reduce((sum, w) => sum + w.remaining, 0);

  async function pump() {
    pumping = true;
    try {
      while (!closed && (waiters.transactional.length > 0 || waiters.promotional.length > 0)) {
        const asked = { transactional: wanted("transactional"), promotional: wanted("promotional") };
        const askedFor = [...waiters.transactional, ...waiters.promotional];
        const result = await take(asked);
        serve("transactional", result.granted.transactional);
        serve("promotional", result.granted.promotional);
        short.transactional = result.granted.transactional < asked.transactional;
        // Transactional short means the shared bucket is empty too: promotional has nothing now.
        short.promotional = result.granted.promotional < asked.promotional || short.transactional;
        for (const waiter of askedFor) if (waiter.remaining > 0 && short[waiter.lane]) waiter.starved = true;
        if (waiters.transactional.length === 0 && waiters.promotional.length === 0) break;
        // Processes waiting for the same token would otherwise all ask at the same instant.
        const delay = Math.max(1, result.retryInMs) + Math.random() * Math.min(50, Math.max(1, result.retryInMs));
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } catch (error) {
      for (const waiter of [...waiters.transactional, ...waiters.promotional]) waiter.reject(error as Error);
      waiters.transactional = [];
      waiters.promotional = [];
    } finally {
      pumping = false;
      // Nothing waits any more (or everything was failed): no lane is spent until a bucket says so.
      short.transactional = false;
      short.promotional = false;
    }
  }

  return {
    acquire(lane, count) {
      if (count <= 0) return Promise.resolve(0);
      if (closed) return Promise.reject(new LimiterClosed());
      return new Promise<number>((resolve, reject) => {
        waiters[lane].push({ lane, remaining: count, since: Date.now(), starved: false, resolve, reject });
        if (!pumping) void pump();
        // A transactional send never sleeps behind a promotional wait: its reserve may have a token now.
        else if (lane === "transactional") wake?.();
      });
    },
    waiting: (lane) => waiters[lane].length,
    spent: (lane) => short[lane] && waiters[lane].length > 0,
    rates: options.rates,
    close() {
      closed = true;
      wake?.();
      const error = new LimiterClosed();
      for (const waiter of [...waiters.transactional, ...waiters.promotional]) waiter.reject(error);
      waiters.transactional = [];
      waiters.promotional = [];
    },
  };
}
