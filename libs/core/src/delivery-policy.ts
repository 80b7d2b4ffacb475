import type { DeadLetterClass } from "./dead-letter.js";

/**
 * The delivery policy, in one place and pure: what a provider's answer means for its address
 * (`classifyAnswer`), how long the next attempt waits (`backoffMs`), and what one attempt leads
 * to (`decideDelivery`): delivered, retried, parked, expired, dead-lettered or left unsettled.
 * The workers gather the inputs, call the provider and execute the decision
 * (apps/workers/src/delivery/send.ts). No I/O: the time comes in as `now`, and the jitter's
 * random draw may be passed in (`random`).
 */

/**
 * Delay before retry number `attempt` (1-based): an exponential ceiling, capped, with equal
 * jitter (AWS architecture blog: half the ceiling fixed, half random), never below what the
 * other side asked for with Retry-After. Half of the ceiling is always waited, so a retry is
 * never immediate, whatever the draw.
 */
export function backoffMs(
  attempt: number,
  baseMs: number,
  maxMs: number,
  retryAfterMs = 0,
  random = Math.random,
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  const half = ceiling / 2;
  return Math.max(retryAfterMs, Math.ceil(half + random() * half));
}

/**
 * One provider call's answer as the provider classified it (every Provider's `send` answers one):
 * only the provider knows what its answers mean. `transient` may be retried (after
 * `retryAfterMs` when the provider said so); `permanent` never is. A transient answer with
 * neither `status` nor `notSent` (a timeout, a reset once the request was written) may have been
 * accepted: its outcome is unknown.
 */
export type ProviderAnswer =
  | { outcome: "accepted"; providerId: string }
  | {
      outcome: "transient";
      reason: string;
      retryAfterMs?: number;
      /** The provider's HTTP status, when it answered: it refused the send, so retrying cannot duplicate it. */
      status?: number;
      /** No answer, and the request never reached the provider (refused, DNS, TLS): a retry cannot duplicate it. */
      notSent?: true;
    }
  | {
      outcome: "permanent";
      reason: string;
      status?: number;
      /** The address itself is dead (a push subscription gone or unusable): remove it, never retry it. */
      addressGone?: boolean;
    };

/**
 * What one provider call meant for its address.
 * The provider classifies its own failures; what the policy adds is whether another attempt
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

/** Classifies a provider's answer; `idempotent`: the provider ignores a repeated send. */
export function classifyAnswer(answer: ProviderAnswer, idempotent = false): AddressResult {
  switch (answer.outcome) {
    case "accepted":
      return { kind: "accepted", providerId: answer.providerId };
    case "permanent":
      return answer.addressGone === true
        ? { kind: "gone", reason: answer.reason }
        : { kind: "permanent", reason: answer.reason };
    case "transient":
      if (answer.status === undefined && answer.notSent !== true && !idempotent) {
        return { kind: "unknown", reason: answer.reason };
      }
      return answer.retryAfterMs === undefined
        ? { kind: "transient", reason: answer.reason }
        : { kind: "transient", reason: answer.reason, retryAfterMs: answer.retryAfterMs };
  }
}

/** Answers that say the provider is unwell: they feed its circuit breaker. */
export const countsAgainstProvider = (answer: ProviderAnswer): boolean => answer.outcome === "transient";

/** An address an attempt settled as accepted, with the provider's id for it. */
export interface AcceptedAddress {
  key: string;
  provider_id: string;
}

export interface AttemptInput {
  /** This attempt's results, one per address it called. */
  results: ReadonlyArray<{ key: string; result: AddressResult }>;
  /** Addresses accepted by earlier attempts of this run. */
  earlierAccepted: readonly AcceptedAddress[];
  /** Addresses earlier attempts of this run settled (never to be called again). */
  earlierSettled: readonly string[];
  /** Attempts of this run so far, this one included when it called the provider. */
  attemptsUsed: number;
  /** Provider attempts of a run before a transient failure is dead-lettered (MAX_ATTEMPTS). */
  maxAttempts: number;
  /** Backoff ceiling of the first retry, doubled with each attempt (RETRY_BASE_MS). */
  retryBaseMs: number;
  /** Largest backoff ceiling (RETRY_MAX_MS); a provider's Retry-After may ask for longer. */
  retryMaxMs: number;
  /** Delay before a breaker-parked item is looked at again. */
  parkMs: number;
  /** Epoch ms of the notification's deliver-by deadline; null without one. */
  deliverByMs: number | null;
  /** Epoch ms of the decision. */
  now: number;
  random?: () => number;
}

/**
 * What one attempt leads to; the workers execute it:
 * - delivered: an address accepted and nothing is left to retry; `reason` names those that did not
 * - retry: a transient failure with attempts left, tried again after `delayMs`
 * - park: the provider's breaker kept the call from going out; looked at again after `delayMs`
 *   without spending an attempt
 * - expire: the next attempt would come at or after the deliver-by deadline: nothing more is
 *   sent (delivered instead when some addresses already accepted)
 * - dead_letter: a definite refusal, or transient failures that used up `maxAttempts`
 * - unsettled: the provider may have accepted; never resent, a receipt or an operator settles it
 *
 * `settled` (this attempt's and earlier attempts') are the addresses never to call again.
 */
export type DeliveryDecision =
  | { action: "delivered"; providerId: string; reason: string | null }
  | { action: "retry"; reason: string; delayMs: number; settled: string[]; accepted: AcceptedAddress[] }
  | { action: "park"; reason: string; delayMs: number; settled: string[]; accepted: AcceptedAddress[] }
  | { action: "expire"; reason: string; settled: string[]; accepted: AcceptedAddress[] }
  | { action: "dead_letter"; class: Exclude<DeadLetterClass, "outcome_unknown">; reason: string }
  | { action: "unsettled"; reason: string };

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * Turns the results of one attempt into the channel's next state. One address (email, SMS,
 * in-app) maps straight through; for push, a user's subscriptions are one channel: it is
 * delivered when any subscription accepted and nothing is left to retry, and only the addresses
 * that failed definitively are tried again.
 */
export function decideDelivery(input: AttemptInput): DeliveryDecision {
  const accepted: AcceptedAddress[] = [...input.earlierAccepted];
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
      return waitOrExpire(input, { action: "park", reason: first.reason, delayMs: input.parkMs }, settled, accepted);
    }
    if (input.attemptsUsed < input.maxAttempts) {
      const retryAfterMs = Math.max(...transient.map((t) => t.retryAfterMs));
      const delayMs = backoffMs(input.attemptsUsed, input.retryBaseMs, input.retryMaxMs, retryAfterMs, input.random);
      const reason = (transient[0] as { reason: string }).reason;
      return waitOrExpire(input, { action: "retry", reason, delayMs }, settled, accepted);
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

/** Another attempt later, unless it would come at or after the deadline: then nothing more is sent. */
function waitOrExpire(
  input: AttemptInput,
  wait: { action: "retry" | "park"; reason: string; delayMs: number },
  settledNow: string[],
  accepted: AcceptedAddress[],
): DeliveryDecision {
  const settled = [...new Set([...input.earlierSettled, ...settledNow])];
  if (input.deliverByMs !== null && input.now + wait.delayMs >= input.deliverByMs) {
    return { action: "expire", reason: wait.reason, settled, accepted };
  }
  return { ...wait, settled, accepted };
}
