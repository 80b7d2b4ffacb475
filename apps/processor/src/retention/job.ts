import { archiveAll } from "@notify/cli/retention";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";

export interface RetentionJob {
  /** Finishes the batch in hand, then stops. */
  stop(): Promise<void>;
}

/**
 * The scheduled side of retention: every `intervalMs` it archives what is past the window,
 * in short transactions (libs/cli retention.ts), the same work `notify retention run` does.
 */
export function startRetention(
  deps: { database: Database; log: Logger },
  options: { intervalMs: number; days: number; dir: string },
): RetentionJob {
  let stopped = false;
  let wake: (() => void) | undefined;
  const loop = (async () => {
    while (!stopped) {
      try {
        const archived = await archiveAll(deps.database, { dir: options.dir, days: options.days });
        if (archived > 0) deps.log.info({ archived, dir: options.dir }, "archived notifications past retention");
      } catch (error) {
        deps.log.warn({ err: error }, "archiving notifications failed; will retry");
      }
      if (stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, options.intervalMs);
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
