import type { Logger } from "@notify/log";

export interface Periodic {
  /** Lets the round in hand finish, skips the nap, then resolves. */
  stop(): Promise<void>;
}

/** Whether this instance runs the deployment's periodic jobs now (it holds the singleton lease). */
export type Leader = () => boolean;

/**
 * Runs `round` now and again `intervalMs` after each round ends, until stopped; with `leader`,
 * only ticks where it answers true run a round, so one instance of many does the job. A failed
 * round is logged and retried at the next tick. `round` gets `isStopping` so a long round (batch
 * after batch) can end early on shutdown, or when the instance stops leading.
 */
export function every(
  intervalMs: number,
  log: Logger,
  what: string,
  round: (isStopping: () => boolean) => Promise<void>,
  leader: Leader = () => true,
): Periodic {
  let stopped = false;
  let wake: (() => void) | undefined;
  const isStopping = () => stopped || !leader();
  const loop = (async () => {
    while (!stopped) {
      const leading = leader();
      try {
        if (leading) await round(isStopping);
      } catch (error) {
        log.warn({ err: error }, `${what} failed; will retry`);
      }
      if (stopped) break;
      // An instance that does not lead looks again soon: it may take over at any moment.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, leading ? intervalMs : Math.min(intervalMs, 1000));
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
