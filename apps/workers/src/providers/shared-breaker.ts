import type { KV } from "@notify/bus";
import type { Logger } from "@notify/log";
import type { BreakerStateName, ProviderBreaker } from "./breaker.js";

/** What one worker process decided about a provider, in notify_breakers under the provider's name. */
interface SharedState {
  state: "open" | "closed";
  /** The worker process that decided (host:pid). */
  by: string;
  /** Its clock when it decided: an old record met at start is history, not an outage. */
  at: number;
}

export interface SharedBreaker {
  /** Called for each change of this process's breaker: opened or closed here, it is told to the others. */
  onLocalChange(state: BreakerStateName): void;
  stop(): Promise<void>;
}

/**
 * Shares a provider's breaker between worker processes. When one process's breaker opens (its
 * own calls failed) or closes (its probes succeeded), it writes that to notify_breakers; every
 * other process reads the key every `pollMs` and takes a new decision over: an open one parks
 * its work too, without spending its own calls on a provider known to be down, and probes after
 * its own open period; a closed one lets its parked work through. A process that loses the bucket
 * keeps judging the provider by its own calls alone.
 */
export function shareBreakerState(options: {
  kv: KV;
  breaker: ProviderBreaker;
  worker: string;
  log: Logger;
  /** An open decision older than this when first met is not applied (the breaker's open period). */
  openMs: number;
  pollMs?: number;
}): SharedBreaker {
  const { kv, breaker, worker, log } = options;
  const key = breaker.provider;
  let applying = false;
  let seen: number | undefined;
  let stopped = false;

  const write = (state: "open" | "closed") =>
    kv
      .put(key, JSON.stringify({ state, by: worker, at: Date.now() } satisfies SharedState))
      .then((revision) => {
        seen = revision;
      })
      .catch((error: unknown) => log.warn({ err: error, provider: key }, "could not share the breaker state"));

  const take = async (first: boolean) => {
    const entry = await kv.get(key);
    if (entry === null || entry.operation !== "PUT" || entry.revision === seen) return;
    seen = entry.revision;
    const shared = entry.json<SharedState>();
    if (shared.by === worker) return;
    if (first && Date.now() - shared.at > options.openMs) return;
    const local = breaker.state();
    if (shared.state === "open" ? local === "closed" : local !== "closed") {
      applying = true;
      try {
        await breaker.force(shared.state);
      } finally {
        applying = false;
      }
      log.info(
        { provider: key, breaker: shared.state, decided_by: shared.by },
        "took another worker's breaker decision",
      );
    }
  };

  const loop = (async () => {
    for (let first = true; !stopped; first = false) {
      await take(first).catch((error: unknown) => log.debug({ err: error, provider: key }, "breaker state not read"));
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 500));
    }
  })();

  return {
    onLocalChange(state) {
      if (applying || state === "half_open") return;
      void write(state);
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
