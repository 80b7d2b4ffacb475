import type { Priority } from "@notify/core";
import type { ProviderGate } from "../providers/gate.js";
import type { DeliverDeps } from "./context.js";

/** Attempts a provider gets of one notification before its next ones fail over, when not configured. */
export const DEFAULT_FAILOVER_AFTER_ATTEMPTS = 2;

/**
 * Every provider of the channel in the order this attempt tries them: the channel's own first,
 * until the notification has used up its attempts with it (a transient error past the retries
 * meant for it); then the next one, and so on, the rest after it in their configured order.
 */
function providerOrder(deps: Pick<DeliverDeps, "gate" | "failover" | "failoverAfterAttempts">, attemptsUsed: number) {
  const gates = [deps.gate, ...(deps.failover ?? [])];
  const per = Math.max(1, deps.failoverAfterAttempts ?? DEFAULT_FAILOVER_AFTER_ATTEMPTS);
  const start = Math.min(Math.floor(attemptsUsed / per), gates.length - 1);
  return [gates[start] as ProviderGate, ...gates.filter((_, i) => i !== start)];
}

/**
 * The provider for this attempt: the first in `providerOrder` whose breaker is not open and
 * whose rate for this lane is not spent for now (sends wait there for a token), else the
 * first whose breaker is not open (it waits for a token there). Null when every breaker is
 * open: the item parks. Without a failover provider this is the channel's own.
 */
export function chooseGate(
  deps: Pick<DeliverDeps, "gate" | "failover" | "failoverAfterAttempts">,
  lane: Priority,
  attemptsUsed: number,
): ProviderGate | null {
  const usable = providerOrder(deps, attemptsUsed).filter((gate) => gate.breaker.state() !== "open");
  return usable.find((gate) => !gate.limiter.spent(lane)) ?? usable[0] ?? null;
}

/**
 * The gate of the provider a guard names (the one its claim's send went to); the channel's own
 * for a guard that names none (one kept by a release without failover, whose sends all went
 * to the channel's own provider).
 */
export function gateNamed(deps: Pick<DeliverDeps, "gate" | "failover">, name: string | undefined): ProviderGate {
  return [deps.gate, ...(deps.failover ?? [])].find((gate) => gate.provider.name === name) ?? deps.gate;
}
