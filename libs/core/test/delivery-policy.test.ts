import fc from "fast-check";
import t from "tap";
import { statusesMovableTo } from "../src/channel-status.js";
import { DEAD_LETTER_CLASSES } from "../src/dead-letter.js";
import {
  type AddressResult,
  type AttemptInput,
  backoffMs,
  chooseProvider,
  classifyAnswer,
  countAttempt,
  countsAgainstProvider,
  DEFAULT_FAILOVER_AFTER_ATTEMPTS,
  type DeliveryDecision,
  decideAtDeadline,
  decideDelivery,
  decideProvider,
  decideResume,
  type ProviderAnswer,
  type ProviderInput,
  type ProviderView,
  parkDelayMs,
  providerOrder,
  type ResumeInput,
  runAttempts,
  SENDABLE,
} from "../src/delivery-policy.js";
import { GUARD_STATES, type GuardValue } from "../src/send-guard.js";

t.test("backoff waits half its exponential, capped ceiling and up to all of it, never below Retry-After", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 1, max: 10_000 }),
      fc.integer({ min: 0, max: 100_000 }),
      fc.double({ min: 0, max: 0.999999, noNaN: true }),
      (attempt, base, retryAfter, r) => {
        const max = base * 50;
        const delay = backoffMs(attempt, base, max, retryAfter, () => r);
        const ceiling = Math.min(max, base * 2 ** (attempt - 1));
        return delay >= Math.max(retryAfter, ceiling / 2) && delay <= Math.max(retryAfter, ceiling) && delay > 0;
      },
    ),
  );
  t.equal(
    backoffMs(3, 100, 10_000, 0, () => 0.5),
    300,
    "half of 100 * 2^2, plus half of the other half",
  );
  t.equal(
    backoffMs(30, 100, 10_000, 0, () => 0.999),
    9995,
    "capped",
  );
});

t.test("a retry is never immediate, whatever the draw", async (t) => {
  t.ok(backoffMs(1, 100, 1000, 0, () => 0) >= 50);
  t.ok(backoffMs(1, 1, 1000, 0, () => 0) >= 1);
});

// Draws spread evenly over [0, 1): their mean delay is the backoff's expected delay.
const DRAWS = Array.from({ length: 64 }, (_, i) => (i + 0.5) / 64);
const expectedDelay = (attempt: number, base: number, max: number) =>
  DRAWS.reduce((sum, r) => sum + backoffMs(attempt, base, max, 0, () => r), 0) / DRAWS.length;

t.test("backoff grows with the attempt, for every draw and so in expectation, up to the cap", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 59 }),
      fc.integer({ min: 1, max: 600_000 }),
      fc.integer({ min: 1, max: 3_600_000 }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      (attempt, base, max, r) =>
        backoffMs(attempt + 1, base, max, 0, () => r) >= backoffMs(attempt, base, max, 0, () => r) &&
        backoffMs(attempt, base, max, 0, () => r) <= max,
    ),
  );
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 59 }),
      fc.integer({ min: 1, max: 600_000 }),
      fc.integer({ min: 1, max: 3_600_000 }),
      (attempt, base, max) => {
        const now = expectedDelay(attempt, base, max);
        const ceiling = Math.min(max, base * 2 ** (attempt - 1));
        // Equal jitter: three quarters of the ceiling on average (plus at most 1 ms of rounding up).
        return expectedDelay(attempt + 1, base, max) >= now && Math.abs(now - 0.75 * ceiling) <= 1;
      },
    ),
  );
  t.pass("monotone in the attempt, bounded by the cap");
});

t.test("classifyAnswer: what a provider's answer means for its address", async (t) => {
  const table: Array<[string, ProviderAnswer, boolean, AddressResult]> = [
    ["accepted", { outcome: "accepted", providerId: "p1" }, false, { kind: "accepted", providerId: "p1" }],
    ["permanent", { outcome: "permanent", reason: "400", status: 400 }, false, { kind: "permanent", reason: "400" }],
    [
      "address gone",
      { outcome: "permanent", reason: "410", status: 410, addressGone: true },
      false,
      { kind: "gone", reason: "410" },
    ],
    [
      "answered transient",
      { outcome: "transient", reason: "503", status: 503 },
      false,
      { kind: "transient", reason: "503" },
    ],
    [
      "answered with Retry-After",
      { outcome: "transient", reason: "429", status: 429, retryAfterMs: 3000 },
      false,
      { kind: "transient", reason: "429", retryAfterMs: 3000 },
    ],
    [
      "never reached the provider",
      { outcome: "transient", reason: "ECONNREFUSED", notSent: true },
      false,
      { kind: "transient", reason: "ECONNREFUSED" },
    ],
    ["no answer", { outcome: "transient", reason: "timeout" }, false, { kind: "unknown", reason: "timeout" }],
    [
      "no answer from a provider that ignores a repeated send",
      { outcome: "transient", reason: "timeout" },
      true,
      { kind: "transient", reason: "timeout" },
    ],
  ];
  for (const [name, answer, idempotent, expected] of table) t.same(classifyAnswer(answer, idempotent), expected, name);
  t.ok(countsAgainstProvider({ outcome: "transient", reason: "503", status: 503 }), "a transient answer counts");
  t.notOk(countsAgainstProvider({ outcome: "permanent", reason: "400" }), "a bad address says nothing of the provider");
});

const r = (kind: AddressResult["kind"], extra: Record<string, unknown> = {}) =>
  ({ kind, reason: `${kind} reason`, providerId: "p1", ...extra }) as AddressResult;

t.test("decideDelivery: the next state from one attempt's results", async (t) => {
  const base = {
    earlierAccepted: [],
    earlierSettled: [],
    maxAttempts: 3,
    retryBaseMs: 100,
    retryMaxMs: 1000,
    parkMs: 1500,
    deliverByMs: null,
    now: 0,
    random: () => 0.5,
  };
  const table: Array<[string, Array<AddressResult>, number, string, Record<string, unknown>?]> = [
    ["accepted", [r("accepted")], 1, "delivered", { providerId: "p1", reason: null }],
    // Half the ceiling (100 ms at the first attempt) and half of the other half at random 0.5.
    ["transient, attempts left", [r("transient")], 1, "retry", { delayMs: 75 }],
    ["transient with Retry-After", [r("transient", { retryAfterMs: 5000 })], 1, "retry", { delayMs: 5000 }],
    ["transient, last attempt", [r("transient")], 3, "dead_letter", { class: "retries_exhausted" }],
    ["permanent", [r("permanent")], 1, "dead_letter", { class: "permanent" }],
    ["gone", [r("gone")], 1, "dead_letter", { class: "permanent" }],
    ["unknown", [r("unknown")], 1, "unsettled"],
    ["breaker open, nothing called", [r("skipped")], 0, "park", { delayMs: 1500 }],
    ["accepted and gone", [r("accepted"), r("gone")], 1, "delivered"],
    ["accepted and transient", [r("accepted"), r("transient")], 1, "retry"],
    ["accepted and transient, last attempt", [r("accepted"), r("transient")], 3, "delivered"],
    ["unknown and transient, last attempt", [r("unknown"), r("transient")], 3, "unsettled"],
    ["no address at all", [], 1, "dead_letter", { class: "permanent", reason: "no address to send to" }],
  ];
  for (const [name, results, attemptsUsed, action, extra] of table) {
    const decision = decideDelivery({
      ...base,
      attemptsUsed,
      results: results.map((result, i) => ({ key: `k${i}`, result })),
    });
    t.match(decision, { action, ...extra }, name);
  }
  const earlier = decideDelivery({
    ...base,
    attemptsUsed: 3,
    earlierAccepted: [{ key: "k9", provider_id: "earlier" }],
    results: [{ key: "k0", result: r("transient") }],
  });
  t.match(earlier, { action: "delivered", providerId: "earlier" }, "an earlier attempt's acceptance counts");
  t.match(
    decideDelivery({
      ...base,
      attemptsUsed: 1,
      earlierSettled: ["k8", "k1"],
      results: [
        { key: "k0", result: r("transient") },
        { key: "k1", result: r("gone") },
      ],
    }),
    { action: "retry", settled: ["k8", "k1"] },
    "earlier settled addresses stay settled, once each",
  );
  t.same(
    decideDelivery({ ...base, attemptsUsed: 1, deliverByMs: 75, results: [{ key: "k0", result: r("transient") }] }),
    { action: "expire", reason: "deadline_before_next_attempt", settled: [] },
    "a retry that would come at the deadline expires instead",
  );
  t.same(
    decideDelivery({
      ...base,
      attemptsUsed: 1,
      deliverByMs: 75,
      earlierAccepted: [{ key: "k9", provider_id: "earlier" }],
      results: [{ key: "k0", result: r("transient") }],
    }),
    {
      action: "delivered_at_deadline",
      providerId: "earlier",
      accepted: [{ key: "k9", provider_id: "earlier" }],
      reason: "1 address(es) accepted before the deliver-by deadline; the others were not sent",
    },
    "delivered instead when an address accepted in time",
  );
  t.match(
    decideDelivery({ ...base, attemptsUsed: 1, deliverByMs: 76, results: [{ key: "k0", result: r("transient") }] }),
    { action: "retry", delayMs: 75 },
    "one that comes before it is made",
  );
});

// Every kind of result, on up to five addresses, with every input the workers pass.
const reason = fc.string({ maxLength: 12 });
const addressResult: fc.Arbitrary<AddressResult> = fc.oneof(
  fc.record({ kind: fc.constant("accepted" as const), providerId: fc.string({ maxLength: 8 }) }),
  fc.record({ kind: fc.constant("gone" as const), reason }),
  fc.record({ kind: fc.constant("permanent" as const), reason }),
  fc.record(
    { kind: fc.constant("transient" as const), reason, retryAfterMs: fc.integer({ min: 0, max: 86_400_000 }) },
    { requiredKeys: ["kind", "reason"] },
  ),
  fc.record({ kind: fc.constant("unknown" as const), reason }),
  fc.record({ kind: fc.constant("skipped" as const), reason }),
);
const attemptInput: fc.Arbitrary<AttemptInput> = fc
  .record({
    results: fc.array(addressResult, { maxLength: 5 }),
    earlierAccepted: fc.array(fc.constantFrom("e0", "e1"), { maxLength: 2 }),
    earlierSettled: fc.array(fc.constantFrom("e0", "e1", "e2", "k0"), { maxLength: 3 }),
    attemptsUsed: fc.integer({ min: 0, max: 60 }),
    maxAttempts: fc.integer({ min: 1, max: 50 }),
    retryBaseMs: fc.integer({ min: 1, max: 600_000 }),
    retryMaxMs: fc.integer({ min: 1, max: 3_600_000 }),
    parkMs: fc.integer({ min: 0, max: 3_600_000 }),
    now: fc.integer({ min: 0, max: 4_000_000_000_000 }),
    deadlineInMs: fc.option(fc.integer({ min: -60_000, max: 86_400_000 }), { nil: null }),
    draw: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  })
  .map(({ results, earlierAccepted, deadlineInMs, draw, ...rest }) => ({
    ...rest,
    results: results.map((result, i) => ({ key: `k${i}`, result })),
    earlierAccepted: earlierAccepted.map((key) => ({ key, provider_id: `id-${key}` })),
    deliverByMs: deadlineInMs === null ? null : rest.now + deadlineInMs,
    random: () => draw,
  }));

const kinds = (input: AttemptInput) => new Set(input.results.map(({ result }) => result.kind));
const keysOf = (input: AttemptInput, kind: AddressResult["kind"]) =>
  input.results.filter(({ result }) => result.kind === kind).map(({ key }) => key);
const anyAccepted = (input: AttemptInput) => input.earlierAccepted.length > 0 || kinds(input).has("accepted");
const WAITS: ReadonlySet<DeliveryDecision["action"]> = new Set(["retry", "park", "expire"]);

t.test("every input has a decision, and a wait is a finite, non-negative delay", async (t) => {
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery(input);
      switch (decision.action) {
        case "delivered":
          return decision.providerId !== undefined;
        case "retry":
          return Number.isFinite(decision.delayMs) && decision.delayMs > 0;
        case "park":
          return decision.delayMs === input.parkMs;
        case "expire":
          return (
            input.deliverByMs !== null && !anyAccepted(input) && decision.reason === "deadline_before_next_attempt"
          );
        case "delivered_at_deadline":
          return input.deliverByMs !== null && anyAccepted(input);
        case "dead_letter":
          return decision.class === "permanent" || decision.class === "retries_exhausted";
        case "unsettled":
          return typeof decision.reason === "string";
      }
    }),
    { numRuns: 2000 },
  );
  t.pass("total");
});

t.test("Retry-After is honoured; the backoff alone stays within RETRY_MAX_MS", async (t) => {
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery({ ...input, deliverByMs: null });
      if (decision.action !== "retry") return true;
      const retryAfter = Math.max(
        0,
        ...input.results.map(({ result }) => (result.kind === "transient" ? (result.retryAfterMs ?? 0) : 0)),
      );
      return (
        decision.delayMs >= retryAfter &&
        decision.delayMs <= Math.max(retryAfter, input.retryMaxMs) &&
        // Past the cap only because the provider asked for that long, and then exactly that long.
        (decision.delayMs <= input.retryMaxMs || decision.delayMs === retryAfter)
      );
    }),
    { numRuns: 2000 },
  );
  t.pass("honoured within the cap");
});

t.test("the attempt cap ends in a dead letter, never another attempt", async (t) => {
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery(input);
      const attempted = input.results.some(({ result }) => result.kind !== "skipped");
      if (input.attemptsUsed < input.maxAttempts || !attempted) return true;
      // Nor does the deadline end it: no wait was left to reach it.
      if (WAITS.has(decision.action) || decision.action === "delivered_at_deadline") return false;
      // Transient failures alone, nothing accepted and nothing unknown: retries exhausted.
      const only = [...kinds(input)].every((kind) => kind === "transient" || kind === "skipped");
      if (only && kinds(input).has("transient") && !anyAccepted(input)) {
        return decision.action === "dead_letter" && decision.class === "retries_exhausted";
      }
      return true;
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery(input);
      return decision.action !== "retry" || input.attemptsUsed < input.maxAttempts;
    }),
  );
  t.pass("no retry past the cap");
});

t.test("an unknown outcome is never sent again", async (t) => {
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery(input);
      const unknown = keysOf(input, "unknown");
      if (unknown.length === 0) return true;
      // Another attempt calls only the addresses not settled: the unknown ones are settled.
      if (WAITS.has(decision.action)) {
        const settled = "settled" in decision ? decision.settled : [];
        return unknown.every((key) => settled.includes(key));
      }
      // With nothing accepted, the channel is unsettled: neither failed nor delivered.
      return anyAccepted(input) || decision.action === "unsettled";
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(fc.string({ maxLength: 12 }), (reason) => {
      const kind = classifyAnswer({ outcome: "transient", reason }).kind;
      return kind === "unknown";
    }),
  );
  t.pass("unknown outcomes are settled or unsettled, never retried");
});

t.test("addresses settled for good are never called again; a wait never reaches past the deadline", async (t) => {
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery(input);
      if (!WAITS.has(decision.action) || !("settled" in decision)) return true;
      const final = [...keysOf(input, "accepted"), ...keysOf(input, "gone"), ...keysOf(input, "permanent")];
      const retryable = [...keysOf(input, "transient"), ...keysOf(input, "skipped")];
      const keptEarlier = input.earlierSettled.every((key) => decision.settled.includes(key));
      const inTime =
        decision.action === "expire" ||
        input.deliverByMs === null ||
        input.now + (decision as { delayMs: number }).delayMs < input.deliverByMs;
      return (
        keptEarlier &&
        inTime &&
        final.every((key) => decision.settled.includes(key)) &&
        retryable.every((key) => !decision.settled.includes(key) || input.earlierSettled.includes(key))
      );
    }),
    { numRuns: 2000 },
  );
  t.pass("settled stays settled");
});

t.test("the deadline ends a run: delivered when some address accepted in time, else expired", async (t) => {
  const accepted = fc.array(fc.record({ key: fc.string({ maxLength: 4 }), provider_id: fc.string({ maxLength: 4 }) }), {
    maxLength: 3,
  });
  const why = fc.constantFrom("deadline_passed" as const, "deadline_before_next_attempt" as const);
  fc.assert(
    fc.property(why, accepted, fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }), (reason, acc, settled) => {
      const decision = decideAtDeadline(reason, acc, settled);
      if (acc.length === 0)
        return decision.action === "expire" && decision.reason === reason && decision.settled.join() === settled.join();
      return (
        decision.action === "delivered_at_deadline" &&
        decision.providerId === acc[0]?.provider_id &&
        decision.accepted.length === acc.length
      );
    }),
  );
  // Through decideDelivery: a wait that would reach the deadline ends the run the same way.
  fc.assert(
    fc.property(attemptInput, (input) => {
      const decision = decideDelivery(input);
      if (decision.action !== "expire" && decision.action !== "delivered_at_deadline") return true;
      return (decision.action === "delivered_at_deadline") === anyAccepted(input);
    }),
    { numRuns: 2000 },
  );
  t.pass("one decision carries both endings");
});

t.test("statuses a worker may send from are those that may still wait", async (t) => {
  t.same([...SENDABLE].sort(), statusesMovableTo("parked").sort(), "pending, deferred, retrying, parked");
  t.same(statusesMovableTo("retrying").sort(), statusesMovableTo("parked").sort());
  t.notOk(SENDABLE.includes("unsettled"), "an unknown outcome is never sent from");
});

t.test("an attempt counts only when it called the provider; a replay starts a fresh budget", async (t) => {
  fc.assert(
    fc.property(
      fc.array(addressResult, { maxLength: 5 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 30 }),
      (results, recorded, beforeReplay) => {
        const claimed = recorded + 1;
        const keyed = results.map((result, i) => ({ key: `k${i}`, result }));
        const count = countAttempt({ results: keyed, claimed, recorded, attemptsBeforeReplay: beforeReplay });
        const called = results.some((result) => result.kind !== "skipped");
        return (
          count.attempted === called &&
          count.attempt === (called ? claimed : recorded) &&
          count.attemptsUsed === runAttempts(count.attempt, beforeReplay) &&
          count.attemptsUsed === count.attempt - beforeReplay
        );
      },
    ),
  );
  // What the breaker kept from going out spends nothing: never a retry or a dead letter for it.
  fc.assert(
    fc.property(attemptInput, (input) => {
      const skippedOnly = input.results.length > 0 && input.results.every(({ result }) => result.kind === "skipped");
      if (!skippedOnly) return true;
      const action = decideDelivery(input).action;
      return action === "park" || action === "expire" || action === "delivered_at_deadline";
    }),
    { numRuns: 2000 },
  );
  t.pass("counted");
});

// A channel's providers, its own first, as the workers see them at one attempt.
const providerView: fc.Arbitrary<ProviderView> = fc
  .record({
    name: fc.constantFrom("sendgrid", "smtp", "sandbox"),
    breakerOpen: fc.boolean(),
    breakerRetryInMs: fc.integer({ min: 0, max: 60_000 }),
    rateSpent: fc.boolean(),
  })
  .map((view) => (view.breakerOpen ? view : { ...view, breakerRetryInMs: 0 }));
const providerInput: fc.Arbitrary<ProviderInput> = fc
  .record({
    providers: fc.array(providerView, { minLength: 1, maxLength: 4 }),
    attemptsUsed: fc.integer({ min: 0, max: 60 }),
    failoverAfterAttempts: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }),
    pastDeadline: fc.boolean(),
    draw: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  })
  .map(({ draw, ...rest }) => ({ ...rest, random: () => draw }));

t.test("failover order: the channel's own first, moving on after its attempts, every provider once", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 1, max: 50 }),
      (count, used, per) => {
        const order = providerOrder(count, used, per);
        const start = Math.min(Math.floor(used / per), count - 1);
        const rest = order.slice(1);
        return (
          order.length === count &&
          new Set(order).size === count &&
          order[0] === start &&
          rest.every((i, n) => n === 0 || i > (rest[n - 1] as number)) &&
          (used >= per || order[0] === 0) &&
          (providerOrder(count, used + 1, per)[0] as number) >= start
        );
      },
    ),
  );
  t.same(providerOrder(1, 40), [0], "without failover, always the channel's own");
  t.same(providerOrder(2, DEFAULT_FAILOVER_AFTER_ATTEMPTS - 1), [0, 1], "its own until its attempts are used");
  t.same(providerOrder(2, DEFAULT_FAILOVER_AFTER_ATTEMPTS), [1, 0], "then the next");
});

t.test("choice of provider: never one whose breaker is open while another's is not", async (t) => {
  fc.assert(
    fc.property(providerInput, (input) => {
      const { providers } = input;
      const decision = decideProvider(input);
      const closed = providers.filter((p) => !p.breakerOpen);
      if (decision.action === "park") {
        // Every breaker open and the deadline still ahead: held until the first may let a probe through.
        const soonest = Math.min(...providers.map((p) => p.breakerRetryInMs));
        return (
          closed.length === 0 &&
          !input.pastDeadline &&
          decision.delayMs >= soonest + 1000 &&
          decision.delayMs < soonest + 2000 &&
          providers.every((p) => decision.reason.includes(p.name))
        );
      }
      const chosen = providers[decision.provider];
      if (chosen === undefined) return false;
      if (closed.length === 0) return input.pastDeadline && decision.provider === 0;
      // A usable provider with a token to spare is preferred to one whose rate is spent.
      const fresh = closed.some((p) => !p.rateSpent);
      return !chosen.breakerOpen && (!fresh || !chosen.rateSpent);
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(providerInput, (input) => {
      // The first of the failover order that is usable, with a token when one has it.
      const order = providerOrder(input.providers.length, input.attemptsUsed, input.failoverAfterAttempts);
      const usable = order.filter((i) => !(input.providers[i] as ProviderView).breakerOpen);
      const model = usable.find((i) => !(input.providers[i] as ProviderView).rateSpent) ?? usable[0] ?? null;
      return chooseProvider(input.providers, input.attemptsUsed, input.failoverAfterAttempts) === model;
    }),
  );
  t.equal(
    parkDelayMs([5000, 2000], () => 0.5),
    3500,
    "the soonest probe, one second, half of another",
  );
  t.same(
    decideProvider({
      providers: [{ name: "sendgrid", breakerOpen: true, breakerRetryInMs: 4000, rateSpent: false }],
      attemptsUsed: 0,
      pastDeadline: false,
      random: () => 0,
    }),
    { action: "park", reason: "sendgrid circuit breaker is open", delayMs: 5000 },
  );
  t.match(
    decideProvider({
      providers: [
        { name: "sendgrid", breakerOpen: true, breakerRetryInMs: 4000, rateSpent: false },
        { name: "smtp", breakerOpen: true, breakerRetryInMs: 9000, rateSpent: false },
      ],
      attemptsUsed: 0,
      pastDeadline: false,
      random: () => 0,
    }),
    { action: "park", reason: "sendgrid and smtp circuit breakers are open" },
  );
});

// Every guard a redelivery may find, any age, at an idempotent provider or not.
const guardValue: fc.Arbitrary<GuardValue> = fc.record(
  {
    state: fc.constantFrom(...GUARD_STATES),
    at: fc.integer({ min: 0, max: 4_000_000_000_000 }),
    attempt: fc.integer({ min: 0, max: 60 }),
    worker: fc.string({ maxLength: 8 }),
    provider: fc.constantFrom("sendgrid", "smtp", "inapp"),
    provider_id: fc.string({ maxLength: 8 }),
    class: fc.constantFrom(...DEAD_LETTER_CLASSES),
    reason: fc.oneof(
      fc.constantFrom("deadline_passed", "deadline_before_next_attempt", "deadline_before_quiet_hours_end"),
      fc.string({ maxLength: 12 }),
    ),
  },
  { requiredKeys: ["state", "at", "attempt"] },
);
const resumeInput: fc.Arbitrary<ResumeInput> = fc
  .record({
    guard: guardValue,
    idempotent: fc.boolean(),
    claimTtlMs: fc.integer({ min: 1, max: 600_000 }),
    age: fc.integer({ min: -1000, max: 1_300_000 }),
    draw: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  })
  .map(({ guard, age, draw, ...rest }) => ({ ...rest, guard, now: guard.at + age, random: () => draw }));

t.test("a guard found held: every state has its decision", async (t) => {
  fc.assert(
    fc.property(resumeInput, (input) => {
      const { guard } = input;
      const decision = decideResume(input);
      switch (guard.state) {
        case "sent":
          return decision.action === "delivered" && decision.providerId === (guard.provider_id ?? null);
        case "expired":
          return (
            decision.action === "expired" &&
            decision.reason ===
              (guard.reason === "deadline_before_next_attempt" ? "deadline_before_next_attempt" : "deadline_passed")
          );
        case "suppressed":
          return decision.action === "suppressed";
        case "canceled":
          // Its client canceled it: never sent, however old, at whatever provider.
          return decision.action === "canceled";
        case "dead":
          return (
            decision.action === "dead_letter" &&
            decision.class === (guard.class ?? "permanent") &&
            decision.reason === (guard.reason ?? "dead-lettered")
          );
        case "unknown":
          return decision.action === (input.idempotent ? "send_again" : "unsettled");
        default: {
          const age = input.now - guard.at;
          if (age < input.claimTtlMs) {
            const left = input.claimTtlMs - age;
            return decision.action === "wait" && decision.delayMs >= left && decision.delayMs < left + 1000;
          }
          return decision.action === (input.idempotent ? "send_again" : "abandoned");
        }
      }
    }),
    { numRuns: 2000 },
  );
  t.pass("total");
});

t.test("a guard found held never leads to a second send of an unknown outcome", async (t) => {
  fc.assert(
    fc.property(resumeInput, (input) => {
      const decision = decideResume(input);
      if (decision.action !== "send_again") return true;
      // Only a provider that ignores a repeated send is asked again, the rule classifyAnswer follows
      // for an answer that never came, and only once the claim's worker cannot still be sending.
      const asksAgain =
        classifyAnswer({ outcome: "transient", reason: "no answer" }, input.idempotent).kind !== "unknown";
      const settledState =
        input.guard.state === "sent" || input.guard.state === "dead" || input.guard.state === "expired";
      const live = input.guard.state !== "unknown" && input.now - input.guard.at < input.claimTtlMs;
      return input.idempotent && asksAgain && !settledState && !live;
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(resumeInput, (input) => decideResume({ ...input, idempotent: false }).action !== "send_again"),
    { numRuns: 2000 },
  );
  t.same(
    decideResume({
      guard: { state: "sending", at: 0, attempt: 2, worker: "w:1" },
      idempotent: false,
      claimTtlMs: 1000,
      now: 1000,
      random: () => 0,
    }),
    {
      action: "abandoned",
      reason: "worker w:1 stopped after the provider call began; the provider may have accepted",
    },
    "a claim past its lifetime is unsettled, never resent",
  );
  t.same(
    decideResume({
      guard: { state: "sending", at: 0, attempt: 2 },
      idempotent: true,
      claimTtlMs: 1000,
      now: 400,
      random: () => 0.5,
    }),
    { action: "wait", delayMs: 1100 },
    "a live claim is waited for, even at a provider that ignores a repeated send",
  );
});
