import type { Logger } from "@notify/log";

export interface Periodic {
  /** Lets the round in hand finish, skips the nap, then resolves. */
  stop(): Promise<void>;
}

/**
 * Runs `round` now and again `intervalMs` after each round ends, until stopped. A failed round
 * is logged and retried at the next tick. `round` gets `isStopping` so a long round (batch
 * after batch) can end early on shutdown.
 */
export function every(
  intervalMs: number,
  log: Logger,
  what: string,
  round: (isStopping: () => boolean) => Promise<void>,
): Periodic {
  let stopped = false;
  let wake: (() => void) | undefined;
  const isStopping = () => stopped;
  const loop = (async () => {
    while (!stopped) {
      try {
        await round(isStopping);
      } catch (error) {
        log.warn({ err: error }, `${what} failed; will retry`);
      }
      if (stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  })();
  return {
    async stop() {
      stopped = true;
      wake?.();
      await loop;
    },
  };
}
