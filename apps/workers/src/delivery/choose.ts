import { decideProvider, type Priority, type ProviderDecision, type ProviderView } from "@notify/core";
import type { ProviderGate } from "../providers/gate.js";
import type { DeliverDeps } from "./context.js";

/** What the policy's choice of provider (`decideProvider`) sees of a gate, for this lane. */
const viewOf = (gate: ProviderGate, lane: Priority): ProviderView => ({
  name: gate.provider.name,
  breakerOpen: gate.breaker.state() === "open",
  breakerRetryInMs: gate.breaker.retryInMs(),
  rateSpent: gate.limiter.spent(lane),
});

export type GateDecision = { action: "use"; gate: ProviderGate } | Extract<ProviderDecision, { action: "park" }>;

/**
 * The policy's choice of provider for this attempt, over the channel's gates as they are now
 * (their breakers and this lane's rates): the gate to use, or park.
 */
export function chooseGate(
  deps: Pick<DeliverDeps, "gate" | "failover" | "failoverAfterAttempts" | "random">,
  lane: Priority,
  attemptsUsed: number,
  pastDeadline: boolean,
): GateDecision {
  const gates = [deps.gate, ...(deps.failover ?? [])];
  const decision = decideProvider({
    providers: gates.map((gate) => viewOf(gate, lane)),
    attemptsUsed,
    failoverAfterAttempts: deps.failoverAfterAttempts,
    pastDeadline,
    random: deps.random,
  });
  return decision.action === "use" ? { action: "use", gate: gates[decision.provider] as ProviderGate } : decision;
}

/**
 * The gate of the provider a guard names (the one its claim's send went to); the channel's own
 * for a guard that names none (one kept by a release without failover, whose sends all went
 * to the channel's own provider).
 */
export function gateNamed(deps: Pick<DeliverDeps, "gate" | "failover">, name: string | undefined): ProviderGate {
  return [deps.gate, ...(deps.failover ?? [])].find((gate) => gate.provider.name === name) ?? deps.gate;
}
