import { backoffMs, type DeadLetterClass } from "@notify/core";
import type { SendResult } from "@notify/providers";

/**
 * What one provider call meant for its address.
 * The provider classifies its own failures; what the worker adds is whether another attempt
 * could duplicate the send. A failure the provider answered (429, 5xx, 408) or that never
 * reached it (refused, DNS, TLS) is retried; one after which the provider may have accepted
 * (a timeout or a reset once the request was written) is an unknown outcome, never sent again
 * (invariant 2), except to a provider that ignores a repeated send (the in-app inbox), which is
 * simply asked again.
 */
export type AddressResult =
  | { kind: "accepted"; providerId: string }
  /** The address itself is dead (a push subscription gone: 404/410): removed from the user. */
  | { kind: "gone"; reason: string }
  | { kind: "permanent"; reason: string }
  /** Another attempt may send: the provider answered with a transient status, or never got the request. */
  | { kind: "transient"; reason: string; retryAfterMs?: number }
  | { kind: "unknown"; reason: string }
  /** Not attempted: the provider's circuit breaker is open. */
  | { kind: "skipped"; reason: string };

export type AddressKind = AddressResult["kind"];

export function classify(result: SendResult, idempotent = false): AddressResult {
  switch (result.outcome) {
    case "accepted":
      return { kind: "accepted", providerId: result.providerId };
    case "permanent":
      return result.addressGone === true
        ? { kind: "gone", reason: result.reason }
        : { kind: "permanent", reason: result.reason };
    case "transient":
      if (result.status === undefined && result.notSent !== true && !idempotent) {
        return { kind: "unknown", reason: result.reason };
      }
      return result.retryAfterMs === undefined
        ? { kind: "transient", reason: result.reason }
        : { kind: "transient", reason: result.reason, retryAfterMs: result.retryAfterMs };
  }
}

/** Results that say the provider is unwell: they feed its circuit breaker. */
export const countsAgainstProvider = (result: SendResult): boolean => result.outcome === "transient";

export interface AttemptInput {
  /** This attempt's results, one per address it called. */
  results: Array<{ key: string; result: AddressResult }>;
  /** Addresses accepted by earlier attempts of this run. */
  earlierAccepted: Array<{ key: string; provider_id: string }>;
  /** Attempts of this run so far, this one included when it called the provider. */
  attemptsUsed: number;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Delay before a breaker-parked item is looked at again. */
  parkMs: number;
  random?: () => number;
}

type Accepted = { key: string; provider_id: string };

/** What the attempt leads to; `settled` are the addresses never to call again. */
export type Decision =
  | { action: "delivered"; providerId: string; reason: string | null }
  | { action: "retry" | "park"; reason: string; delayMs: number; settled: string[]; accepted: Accepted[] }
  | { action: "dead_letter"; class: Exclude<DeadLetterClass, "outcome_unknown">; reason: string }
  | { action: "unsettled"; reason: string };

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * Turns the results of one attempt into the channel's next state. One address (email, SMS,
 * in-app) maps straight through; for push, a user's subscriptions are one channel: it is
 * delivered when any subscription accepted and nothing is left to retry, and only the addresses
 * that failed definitively are tried again.
 */
export function decide(input: AttemptInput): Decision {
  const accepted: Accepted[] = [...input.earlierAccepted];
  const failed: Array<{ kind: AddressKind; reason: string }> = [];
  const retryable: Array<{ kind: "transient" | "skipped"; reason: string; retryAfterMs: number }> = [];
  const settled: string[] = [];
  for (const { key, result } of input.results) {
    if (result.kind === "accepted") accepted.push({ key, provider_id: result.providerId });
    else if (result.kind === "transient" || result.kind === "skipped") {
      retryable.push({
        kind: result.kind,
        reason: result.reason,
        retryAfterMs: ("retryAfterMs" in result && result.retryAfterMs) || 0,
      });
      continue;
    } else failed.push(result);
    settled.push(key);
  }

  let exhausted: string | null = null;
  const first = retryable[0];
  if (first) {
    const attempted = input.results.some(({ result }) => result.kind !== "skipped");
    const transient = retryable.filter((r) => r.kind === "transient");
    if (!attempted || (transient.length === 0 && input.attemptsUsed < input.maxAttempts)) {
      return { action: "park", reason: first.reason, delayMs: input.parkMs, settled, accepted };
    }
    if (input.attemptsUsed < input.maxAttempts) {
      const retryAfterMs = Math.max(...transient.map((t) => t.retryAfterMs));
      return {
        action: "retry",
        reason: (transient[0] as { reason: string }).reason,
        delayMs: backoffMs(input.attemptsUsed, input.retryBaseMs, input.retryMaxMs, retryAfterMs, input.random),
        settled,
        accepted,
      };
    }
    exhausted = `retries exhausted after ${plural(input.attemptsUsed, "attempt")}: ${first.reason}`;
  }

  const firstAccepted = accepted[0];
  if (firstAccepted) {
    const notAccepted = failed.length + (exhausted ? retryable.length : 0);
    const reason =
      notAccepted === 0
        ? null
        : `${plural(accepted.length, "address")} accepted, ${notAccepted} not: ${exhausted ?? failed[0]?.reason}`;
    return { action: "delivered", providerId: firstAccepted.provider_id, reason };
  }
  const unknown = failed.find((f) => f.kind === "unknown");
  if (unknown) return { action: "unsettled", reason: unknown.reason };
  if (exhausted) return { action: "dead_letter", class: "retries_exhausted", reason: exhausted };
  return { action: "dead_letter", class: "permanent", reason: failed[0]?.reason ?? "no address to send to" };
}
