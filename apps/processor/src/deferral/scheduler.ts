import { THROTTLE_PER_MS } from "@notify/core";
import { purgeCapCounts as purgeCounts, purgeThrottleSlots as purgeSlots } from "@notify/db";
import { sendDigests } from "../digests/send.js";
import { every, type Leader } from "../periodic.js";
import type { RouteDeps } from "../routing/plan.js";
import { type ReleaseRound, releaseDue } from "./release.js";

const DAY_MS = 86_400_000;
const PURGE_EVERY_MS = 3_600_000;

export interface Scheduler {
  /** Finishes the release in hand, then stops. */
  stop(): Promise<void>;
}

/**
 * Counter rows of days that are over in every time zone (UTC-12 is a day behind UTC at most),
 * with a day to spare: the cap never reads them again.
 */
export async function purgeCapCounts(deps: Pick<RouteDeps, "database" | "now">): Promise<number> {
  const cutoff = new Date(deps.now().getTime() - 2 * DAY_MS).toISOString().slice(0, 10);
  return purgeCounts(deps.database, cutoff);
}

/**
 * Throttle slots older than the longest period a throttle may have (THROTTLE_PER_MS.max), with a
 * day to spare for processors whose clocks (a slot's time) run apart: no window reads them again.
 * Purged with the cap counters, once an hour.
 */
export async function purgeThrottleSlots(deps: Pick<RouteDeps, "database" | "now">): Promise<number> {
  return purgeSlots(deps.database, new Date(deps.now().getTime() - THROTTLE_PER_MS.max - DAY_MS));
}

/**
 * The processor's timer for deferred notifications and digests: every `intervalMs` it releases
 * what is due, batch after batch while batches come back full, then sends the digests that are
 * due, and once an hour it drops old cap counters. State lives in Postgres only, so a restart (or a second processor) picks up
 * exactly where it stood.
 */
export function startScheduler(
  deps: RouteDeps,
  options: { intervalMs: number; batchSize?: number; leader?: Leader },
): Scheduler {
  const batchSize = options.batchSize ?? 500;
  let lastPurge = 0;
  return every(
    options.intervalMs,
    deps.log,
    "releasing deferred notifications",
    async (isStopping) => {
      let result: Awaited<ReturnType<typeof releaseDue>>;
      const round: ReleaseRound = { after: null };
      do result = await releaseDue(deps, batchSize, round);
      while (!isStopping() && result.settled === batchSize);
      await sendDigests(deps, 100, isStopping);
      if (Date.now() - lastPurge >= PURGE_EVERY_MS) {
        const purged = await purgeCapCounts(deps);
        const slots = await purgeThrottleSlots(deps);
        lastPurge = Date.now();
        if (purged > 0) deps.log.info({ purged }, "purged old promotional counters");
        if (slots > 0) deps.log.info({ purged: slots }, "purged old throttle slots");
      }
    },
    options.leader,
  );
}
