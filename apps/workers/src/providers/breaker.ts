import type { ProviderAnswer } from "@notify/core";
import { BreakerError, BreakerState, Circuit, type SerializableRecord, SlidingCountBreaker } from "mollitia";

export interface BreakerSettings {
  /** Calls the failure rate is computed over (the most recent ones). */
  windowCalls: number;
  minCalls: number;
  failurePercent: number;
  slowCallMs: number;
  openMs: number;
  halfOpenProbes: number;
}

export type BreakerStateName = "closed" | "half_open" | "open";

const STATE_NAMES: Record<BreakerState, BreakerStateName> = {
  [BreakerState.CLOSED]: "closed",
  [BreakerState.HALF_OPENED]: "half_open",
  [BreakerState.OPENED]: "open",
};

/** What a call answers when the breaker did not let it through: nothing was sent. */
export const REJECTED = Symbol("breaker rejected the call");

export interface BreakerSnapshot {
  provider: string;
  state: BreakerStateName;
  since: string;
  /** When an open breaker lets the first probe through. */
  half_open_at: string | null;
}

export interface ProviderBreaker {
  readonly provider: string;
  state(): BreakerStateName;
  /** ms until an open breaker lets a probe through; 0 otherwise. */
  retryInMs(): number;
  /**
   * Runs one provider call through the breaker. Transient and unanswered results count as
   * failures; permanent ones (a bad address) say nothing about the provider's health.
   */
  run(
    call: () => Promise<ProviderAnswer>,
    countsAsFailure: (result: ProviderAnswer) => boolean,
  ): Promise<ProviderAnswer | typeof REJECTED>;
  snapshot(): BreakerSnapshot;
  /**
   * Takes a state another worker process reached (shared through notify_breakers): opened, it
   * parks this process's work for its own open period, then probes; closed, it lets work through.
   */
  force(state: "open" | "closed"): Promise<void>;
  /** Clears the open-state timer, which would otherwise keep the process alive. */
  dispose(): void;
}

/** Carries a failed result through mollitia, which only counts rejections as failures. */
class CountedFailure extends Error {
  constructor(readonly result: ProviderAnswer) {
    super("provider call failed");
  }
}

/** What a breaker with no store answers when asked for its stored window. */
const NOT_STORED = Symbol("the window is kept in memory only");

/**
 * mollitia's count breaker, with its window in this process's memory only. mollitia reads a
 * module's window back through getState() before every call (the hook a shared store
 * overrides), checks each stored call and copies them all: work in proportion to the window on
 * every send, most of what a call through the breaker costs, to restore what is already here.
 * With no store, the read answers that nothing is stored, and mollitia goes on with the window
 * it holds (its answer to a store it cannot read). mollitia logs that answer as a warning
 * through a module's logger: give this module none, or every send logs one. This leans on how
 * mollitia 0.1.1 restores a window, so its version is pinned (apps/workers/package.json), and
 * test/breaker-window.test.ts holds its rule against a model.
 */
class InMemoryCountBreaker extends SlidingCountBreaker {
  override getState(): Promise<SerializableRecord> {
    return Promise.reject(NOT_STORED);
  }
}

/**
 * A circuit breaker per provider over mollitia's window of the most recent calls
 * (its time-window breaker re-validates up to a thousand stored calls on every call, a cost a
 * busy worker feels). One per process, judging the provider by its own calls; what it
 * decides is shared with the other worker processes by shareBreakerState.
 */
export function createBreaker(
  provider: string,
  settings: BreakerSettings,
  onChange: (state: BreakerStateName) => void,
): ProviderBreaker {
  // mollitia compares `failed / calls * 100 >= threshold` in floating point, where an exact
  // share can come out just under it (29 of 50 calls: 57.99... for 58), and takes a threshold of
  // 100 for "never". A millionth below the percent opens on exactly that share, 100 included;
  // a share below it is at least 0.01 lower (a window holds at most 10,000 calls).
  const threshold = settings.failurePercent - 1e-6;
  const module = new InMemoryCountBreaker({
    name: `${provider}-breaker`,
    slidingWindowSize: settings.windowCalls,
    minimumNumberOfCalls: settings.minCalls,
    failureRateThreshold: threshold,
    slowCallDurationThreshold: settings.slowCallMs,
    slowCallRateThreshold: threshold,
    openStateDelay: settings.openMs,
    permittedNumberOfCallsInHalfOpenState: settings.halfOpenProbes,
  });
  module.on("state-changed", (state: BreakerState) => onChange(STATE_NAMES[state]));
  const circuit = new Circuit({
    name: `provider:${provider}`,
    options: { modules: [module] },
    func: (call: () => Promise<ProviderAnswer>) => call(),
  });
  const openUntil = () => module.stateTimestamp + settings.openMs;

  return {
    provider,
    state: () => STATE_NAMES[module.state],
    retryInMs: () => (module.state === BreakerState.OPENED ? Math.max(0, openUntil() - Date.now()) : 0),
    async run(call, countsAsFailure) {
      try {
        return await circuit.execute<ProviderAnswer>(async () => {
          const result = await call();
          if (countsAsFailure(result)) throw new CountedFailure(result);
          return result;
        });
      } catch (error) {
        if (error instanceof CountedFailure) return error.result;
        // mollitia's half-open "max allowed requests" error shares BreakerError's prototype.
        if (error instanceof BreakerError) return REJECTED;
        throw error;
      }
    },
    snapshot: () => ({
      provider,
      state: STATE_NAMES[module.state],
      since: new Date(module.stateTimestamp).toISOString(),
      half_open_at: module.state === BreakerState.OPENED ? new Date(openUntil()).toISOString() : null,
    }),
    force: (state) => (state === "open" ? module.open() : module.close()),
    dispose: () => circuit.dispose(),
  };
}
