import type { ChannelStatus } from "./channel-status.js";
import type { DeadLetterClass } from "./dead-letter.js";
import type { ExpiryReason } from "./deliver-by.js";
import type { GuardValue } from "./send-guard.js";

/**
 * The delivery policy, in one place and pure: which statuses may still send (`SENDABLE`), where
 * an attempt goes or whether it parks (`decideProvider`), what a provider's answer means for its
 * address (`classifyAnswer`), how an attempt counts (`countAttempt`) and how long the next one
 * waits (`backoffMs`), what one attempt leads to (`decideDelivery`), how a run the deadline ends
 * finishes (`decideAtDeadline`), and what a send guard found held means (`decideResume`). Each
 * decision is one discriminated union; the workers gather the inputs, call the provider and
 * execute it (apps/workers/src/delivery/). No I/O: the time comes in as `now`, and every random
 * draw through `random`.
 */

/** Statuses a worker may still send from; anything else is settled (or being replayed). */
export const SENDABLE: readonly ChannelStatus[] = ["pending", "deferred", "retrying", "parked"];

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
  retryAfterMs: number,
  random: () => number,
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  const half = ceiling / 2;
  return Math.max(retryAfterMs, Math.ceil(half + random() * half));
}

/**
 * Delay before an item held by an open breaker is looked at again: until the first of the
 * breakers (`retryInMs`, one per breaker) lets a probe through, plus one to two seconds, drawn,
 * so that the items it held do not all come back at once.
 */
export const parkDelayMs = (retryInMs: readonly number[], random: () => number): number =>
  Math.min(...retryInMs) + 1000 + Math.floor(random() * 1000);

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

/**
 * A send whose outcome is unknown (no answer, or its worker stopped mid-send) is never made again
 * (invariant 2): the provider may have accepted it. A provider that ignores a repeated send (the
 * in-app inbox) is the exception: it is simply asked again.
 */
const asksAgainWhenUnknown = (idempotent: boolean): boolean => idempotent;

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
      if (answer.status === undefined && answer.notSent !== true && !asksAgainWhenUnknown(idempotent)) {
        return { kind: "unknown", reason: answer.reason };
      }
      return answer.retryAfterMs === undefined
        ? { kind: "transient", reason: answer.reason }
        : { kind: "transient", reason: answer.reason, retryAfterMs: answer.retryAfterMs };
  }
}

/** Answers that say the provider is unwell: they feed its circuit breaker. */
export const countsAgainstProvider = (answer: ProviderAnswer): boolean => answer.outcome === "transient";

/**
 * Attempts of the channel's current run: a replay gives it a fresh budget, so the attempts made
 * before it count neither against MAX_ATTEMPTS nor toward a failover.
 */
export const runAttempts = (attempts: number, attemptsBeforeReplay: number): number => attempts - attemptsBeforeReplay;

/** Whether an attempt called the provider: a call its breaker kept from going out is no call. */
const calledProvider = (results: ReadonlyArray<{ result: AddressResult }>): boolean =>
  results.some(({ result }) => result.kind !== "skipped");

export interface AttemptCount {
  /** The provider was called: the attempt is spent, and recorded. */
  attempted: boolean;
  /** The channel's attempt count with this attempt. */
  attempt: number;
  /** The current run's part of it (`runAttempts`), which MAX_ATTEMPTS limits. */
  attemptsUsed: number;
}

/**
 * How one attempt counts: one that called the provider spends the attempt its claim took
 * (`claimed`); one whose every call the breaker kept from going out spends none, and the channel
 * keeps the count it had (`recorded`).
 */
export function countAttempt(input: {
  results: ReadonlyArray<{ result: AddressResult }>;
  claimed: number;
  recorded: number;
  attemptsBeforeReplay: number;
}): AttemptCount {
  const attempted = calledProvider(input.results);
  const attempt = attempted ? input.claimed : input.recorded;
  return { attempted, attempt, attemptsUsed: runAttempts(attempt, input.attemptsBeforeReplay) };
}

/** Attempts a provider gets of one notification before its next ones fail over, when not configured. */
export const DEFAULT_FAILOVER_AFTER_ATTEMPTS = 2;

/** One of a channel's providers, as the choice of provider sees it. */
export interface ProviderView {
  name: string;
  /** Its circuit breaker is open: no call may go to it. */
  breakerOpen: boolean;
  /** ms until its open breaker lets a probe through; 0 when it is not open. */
  breakerRetryInMs: number;
  /** Its rate for this lane is spent for now: a send there waits for a token. */
  rateSpent: boolean;
}

/**
 * Every provider of the channel (indexes into its providers, the channel's own at 0) in the order
 * an attempt tries them: the channel's own first, until the notification has used up its
 * attempts with it (`failoverAfterAttempts`: a transient error past the retries meant for it);
 * then the next one, and so on, the rest after it in their configured order.
 */
export function providerOrder(
  count: number,
  attemptsUsed: number,
  failoverAfterAttempts = DEFAULT_FAILOVER_AFTER_ATTEMPTS,
): number[] {
  const per = Math.max(1, failoverAfterAttempts);
  const start = Math.max(0, Math.min(Math.floor(attemptsUsed / per), count - 1));
  return [start, ...Array.from({ length: count }, (_, i) => i).filter((i) => i !== start)];
}

/**
 * The provider for this attempt (its index): the first in `providerOrder` whose breaker is not
 * open and whose rate for this lane is not spent for now (sends wait there for a token), else the
 * first whose breaker is not open (it waits for a token there). Null when every breaker is open.
 * Without a failover provider this is the channel's own.
 */
export function chooseProvider(
  providers: readonly ProviderView[],
  attemptsUsed: number,
  failoverAfterAttempts?: number,
): number | null {
  const usable = providerOrder(providers.length, attemptsUsed, failoverAfterAttempts).filter(
    (i) => !(providers[i] as ProviderView).breakerOpen,
  );
  return usable.find((i) => !(providers[i] as ProviderView).rateSpent) ?? usable[0] ?? null;
}

export interface ProviderInput {
  /** The channel's providers in their configured order, its own first; at least one. */
  providers: readonly ProviderView[];
  /** Attempts of the current run so far (`runAttempts`). */
  attemptsUsed: number;
  failoverAfterAttempts?: number;
  /** The deliver-by deadline has passed: nothing is sent, whatever the breakers say. */
  pastDeadline: boolean;
  random: () => number;
}

/**
 * Where an attempt goes, before anything is claimed:
 * - use: the provider `chooseProvider` picks; past the deadline with every breaker open, the
 *   channel's own, under whose name the run is ended (nothing is sent)
 * - park: every breaker is open; the item is held without spending an attempt, and looked at
 *   again after `delayMs`, once the first of them may let a probe through
 */
export type ProviderDecision =
  | { action: "use"; provider: number }
  | { action: "park"; reason: string; delayMs: number };

export function decideProvider(input: ProviderInput): ProviderDecision {
  const chosen = chooseProvider(input.providers, input.attemptsUsed, input.failoverAfterAttempts);
  if (chosen !== null) return { action: "use", provider: chosen };
  if (input.pastDeadline) return { action: "use", provider: 0 };
  const names = input.providers.map((provider) => provider.name);
  return {
    action: "park",
    reason: `${names.join(" and ")} circuit breaker${names.length > 1 ? "s are" : " is"} open`,
    delayMs: parkDelayMs(
      input.providers.map((provider) => provider.breakerRetryInMs),
      input.random,
    ),
  };
}

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
  /** The backoff's jitter draw, in [0, 1). */
  random: () => number;
}

/**
 * What one attempt leads to; the workers execute it:
 * - delivered: an address accepted and nothing is left to retry; `reason` names those that did not
 * - retry: a transient failure with attempts left, tried again after `delayMs`
 * - park: the provider's breaker kept the call from going out; looked at again after `delayMs`
 *   without spending an attempt
 * - expire or delivered_at_deadline: the next attempt would come at or after the deliver-by
 *   deadline, so nothing more is sent (`decideAtDeadline`)
 * - dead_letter: a definite refusal, or transient failures that used up `maxAttempts`
 * - unsettled: the provider may have accepted; never resent, a receipt or an operator settles it
 *
 * `settled` (this attempt's and earlier attempts') are the addresses never to call again.
 */
export type DeliveryDecision =
  | { action: "delivered"; providerId: string; reason: string | null }
  | { action: "retry"; reason: string; delayMs: number; settled: string[]; accepted: AcceptedAddress[] }
  | { action: "park"; reason: string; delayMs: number; settled: string[]; accepted: AcceptedAddress[] }
  | DeadlineDecision
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
    const attempted = calledProvider(input.results);
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
    return decideAtDeadline("deadline_before_next_attempt", accepted, settled);
  }
  return { ...wait, settled, accepted };
}

/**
 * How a run ends when its deliver-by deadline comes before its next send; nothing more is sent:
 * - expire: for `reason`, its settled addresses kept
 * - delivered_at_deadline: earlier attempts had some of its addresses accept (a user's push
 *   subscriptions), so it reached those in time: delivered, saying the others were not sent
 */
export type DeadlineDecision =
  | { action: "expire"; reason: ExpiryReason; settled: string[] }
  | { action: "delivered_at_deadline"; providerId: string; accepted: AcceptedAddress[]; reason: string };

export function decideAtDeadline(
  reason: ExpiryReason,
  accepted: readonly AcceptedAddress[],
  settled: readonly string[],
): DeadlineDecision {
  const first = accepted[0];
  if (first === undefined) return { action: "expire", reason, settled: [...settled] };
  return {
    action: "delivered_at_deadline",
    providerId: first.provider_id,
    accepted: [...accepted],
    reason: `${accepted.length} address(es) accepted before the deliver-by deadline; the others were not sent`,
  };
}

export interface ResumeInput {
  /** The guard found held: any state but `failed`, which the next attempt claims. */
  guard: GuardValue;
  /** The provider the guard's send went to ignores a repeated send (the in-app inbox). */
  idempotent: boolean;
  /** A claim still `sending` after this long belongs to a worker that died mid-send. */
  claimTtlMs: number;
  /** Epoch ms of the decision. */
  now: number;
  /** The draw that spreads the look-again of a live claim, in [0, 1). */
  random: () => number;
}

/**
 * What a send guard that someone holds or held means. Its send is finished from what it says,
 * never made again, except at a provider that ignores a repeated send:
 * - delivered: the provider accepted (`sent`) but the status write was lost; reconciled from it
 * - expired: the deadline ended the run (`expired`), for the reason the guard recorded
 * - suppressed: the address is on the suppression list (`suppressed`); never sent
 * - canceled: its client canceled it (`canceled`); never sent, and the item is acknowledged with
 *   nothing recorded but the channel's move to canceled, should the cancel's own have been lost
 * - dead_letter: dead-lettered (`dead`); published again, which its msg id makes a no-op
 * - unsettled: the outcome is unknown (`unknown`); a receipt or an operator settles it
 * - wait: a live claim (`sending`): its worker is still talking to the provider; looked at again
 *   after `delayMs`, once it must be done
 * - abandoned: a claim past its lifetime: its worker stopped after the provider call began, so
 *   the outcome is unknown; the guard is marked so, and the channel unsettled
 * - send_again: an unknown outcome at a provider that ignores a repeated send: the claim is
 *   taken over and the addresses not yet settled are sent again
 */
export type ResumeDecision =
  | { action: "delivered"; providerId: string | null }
  | { action: "expired"; reason: ExpiryReason }
  | { action: "suppressed" }
  | { action: "canceled" }
  | { action: "dead_letter"; class: DeadLetterClass; reason: string }
  | { action: "unsettled"; reason: string }
  | { action: "wait"; delayMs: number }
  | { action: "abandoned"; reason: string }
  | { action: "send_again" };

export function decideResume(input: ResumeInput): ResumeDecision {
  const { guard } = input;
  switch (guard.state) {
    case "sent":
      return { action: "delivered", providerId: guard.provider_id ?? null };
    case "expired":
      return {
        action: "expired",
        reason: guard.reason === "deadline_before_next_attempt" ? guard.reason : "deadline_passed",
      };
    case "suppressed":
      return { action: "suppressed" };
    case "canceled":
      return { action: "canceled" };
    case "dead":
      return { action: "dead_letter", class: guard.class ?? "permanent", reason: guard.reason ?? "dead-lettered" };
    case "unknown":
      if (asksAgainWhenUnknown(input.idempotent)) return { action: "send_again" };
      return { action: "unsettled", reason: guard.reason ?? "outcome unknown" };
    default: {
      const age = input.now - guard.at;
      if (age < input.claimTtlMs) {
        return { action: "wait", delayMs: input.claimTtlMs - age + Math.floor(input.random() * 1000) };
      }
      if (asksAgainWhenUnknown(input.idempotent)) return { action: "send_again" };
      return {
        action: "abandoned",
        reason: `worker ${guard.worker ?? "?"} stopped after the provider call began; the provider may have accepted`,
      };
    }
  }
}
