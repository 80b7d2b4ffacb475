import { setTimeout as sleep } from "node:timers/promises";

/** One try at a callback: the receiver's HTTP status, 0 when it could not be reached. */
export type CallbackAttempt = (signal: AbortSignal) => Promise<number>;

/**
 * How a sandbox posts its callbacks (SendGrid's Event Webhook, Plivo's delivery reports).
 * In memory, three tries a second apart. Durable (the sandbox has a journal), until the
 * receiver answers 2xx, as the real providers retry for hours: the receiver may well be down,
 * e.g. restarting with the rest of the dev stack.
 */
export interface CallbackPoster {
  /** The receiver's last answer, or undefined when stop() came first. */
  post(attempt: CallbackAttempt): Promise<number | undefined>;
  /** Ends durable retries (the journal keeps them for the next start); in memory, a no-op. */
  stop(): void;
}

const IN_MEMORY_TRIES = 3;
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30_000;
// A receiver that never answers must not hold a slot for ever.
const DURABLE_ATTEMPT_TIMEOUT_MS = 10_000;
// After a restart every unacknowledged callback is due at once: a few thousand parallel
// connections would run out of file descriptors.
const DURABLE_CONCURRENCY = 16;

const isSuccess = (status: number): boolean => status >= 200 && status < 300;

/** POSTs and reads the answer to the end (so the connection is reused); 0 when unreachable. */
export const postStatus = (url: string, init: RequestInit): Promise<number> =>
  fetch(url, { ...init, method: "POST" })
    .then(async (res) => {
      await res.arrayBuffer();
      return res.status;
    })
    .catch(() => 0);

export function createCallbackPoster(durable: boolean): CallbackPoster {
  if (!durable) {
    const never = new AbortController().signal;
    return {
      post: async (attempt) => {
        let answer = 0;
        for (let tries = 0; tries < IN_MEMORY_TRIES && (answer === 0 || answer >= 500); tries++) {
          if (tries > 0) await sleep(1000, undefined, { ref: false });
          answer = await attempt(never);
        }
        return answer;
      },
      stop: () => {},
    };
  }

  const stopping = new AbortController();
  const { signal } = stopping;
  let running = 0;
  const waiting: Array<() => void> = [];

  const tryOnce = async (attempt: CallbackAttempt): Promise<number | undefined> => {
    while (running >= DURABLE_CONCURRENCY) {
      if (signal.aborted) return undefined;
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
    if (signal.aborted) return undefined;
    running += 1;
    try {
      return await attempt(AbortSignal.any([signal, AbortSignal.timeout(DURABLE_ATTEMPT_TIMEOUT_MS)]));
    } finally {
      running -= 1;
      waiting.shift()?.();
    }
  };

  return {
    post: async (attempt) => {
      for (let tries = 0; ; tries++) {
        if (tries > 0) {
          // 1 s doubling to 30 s, jittered so callbacks that failed together do not retry together.
          const backoff = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (tries - 1));
          try {
            // Unref'd: pending callbacks never keep a process alive; the journal has them.
            await sleep(backoff * (0.8 + Math.random() * 0.4), undefined, { ref: false, signal });
          } catch {
            return undefined;
          }
        }
        const answer = await tryOnce(attempt);
        if (answer === undefined || isSuccess(answer)) return answer;
        if (signal.aborted) return undefined;
      }
    },
    stop: () => {
      stopping.abort();
      for (const wake of waiting.splice(0)) wake();
    },
  };
}
