import {
  type BreakerDecision,
  type BreakerStateName,
  type Bus,
  type LaneReport,
  readBreakerDecisions,
  readRateStates,
  readWorkerReports,
  type WorkerReport,
} from "@notify/bus";
import { availableTokens, type Channel, type LaneBuckets, type LaneRates } from "@notify/core";
import { toAppError } from "@notify/http";

export interface ProviderView {
  provider: string;
  channel: Channel;
  breaker: {
    state: BreakerStateName;
    decided: "open" | "closed" | null;
    decided_by: string | null;
    decided_at: string | null;
  };
  workers: Array<{
    worker: string;
    breaker: BreakerStateName;
    reported_at: string;
    lanes: { transactional: LaneReport; promotional: LaneReport };
  }>;
  tokens: { transactional: number; promotional: number } | null;
}

/** The buckets' rates from a worker's report of them (a reserve of rate 0 is none). */
const ratesOf = (lanes: { transactional: LaneReport; promotional: LaneReport }): LaneRates => ({
  reserved:
    lanes.transactional.rate_per_second > 0
      ? { perSecond: lanes.transactional.rate_per_second, burst: Math.max(1, lanes.transactional.burst) }
      : null,
  shared: { perSecond: lanes.promotional.rate_per_second, burst: Math.max(1, lanes.promotional.burst) },
});

/** open if any process reports it open, else half_open if any does, else closed. */
const overall = (states: readonly BreakerStateName[]): BreakerStateName =>
  states.includes("open") ? "open" : states.includes("half_open") ? "half_open" : "closed";

/**
 * The providers as the live worker processes report them (notify_workers), with the shared
 * breaker decision (notify_breakers) and the tokens the shared buckets (notify_rate) hold now.
 * Pure: the three reads are given.
 */
export function summarizeProviders(
  reports: readonly WorkerReport[],
  decisions: ReadonlyMap<string, BreakerDecision>,
  buckets: ReadonlyMap<string, LaneBuckets>,
  now: number,
): ProviderView[] {
  const byProvider = new Map<string, ProviderView>();
  for (const report of reports) {
    for (const p of report.providers) {
      let view = byProvider.get(p.provider);
      if (!view) {
        view = {
          provider: p.provider,
          channel: p.channel,
          breaker: { state: "closed", decided: null, decided_by: null, decided_at: null },
          workers: [],
          tokens: null,
        };
        byProvider.set(p.provider, view);
      }
      view.workers.push({ worker: report.worker, breaker: p.breaker, reported_at: report.reported_at, lanes: p.lanes });
    }
  }
  const views = [...byProvider.values()].sort((a, b) =>
    a.provider < b.provider ? -1 : a.provider > b.provider ? 1 : 0,
  );
  for (const view of views) {
    view.breaker.state = overall(view.workers.map((w) => w.breaker));
    const decision = decisions.get(view.provider);
    if (decision) {
      view.breaker.decided = decision.state;
      view.breaker.decided_by = decision.by;
      view.breaker.decided_at = Number.isFinite(decision.at) ? new Date(decision.at).toISOString() : null;
    }
    // The latest report's rates: the workers of one deployment share one configuration.
    const latest = [...view.workers].sort((a, b) => Date.parse(b.reported_at) - Date.parse(a.reported_at))[0];
    if (latest)
      view.tokens = availableTokens(
        buckets.get(view.provider) ?? { reserved: 0, shared: 0 },
        now,
        ratesOf(latest.lanes),
      );
  }
  return views;
}

/** GET /api/v1/ops/providers. */
export async function listProviders(bus: Bus): Promise<{ data: ProviderView[] }> {
  try {
    const reports = await readWorkerReports(bus);
    const providers = [...new Set(reports.flatMap((r) => r.providers.map((p) => p.provider)))];
    const [decisions, buckets] = await Promise.all([
      readBreakerDecisions(bus, providers),
      readRateStates(bus, providers),
    ]);
    return { data: summarizeProviders(reports, decisions, buckets, Date.now()) };
  } catch (error) {
    throw toAppError(error);
  }
}
