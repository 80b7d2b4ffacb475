import fc from "fast-check";
import t from "tap";
import {
  type AddressResult,
  type AttemptInput,
  backoffMs,
  classifyAnswer,
  countsAgainstProvider,
  type DeliveryDecision,
  decideDelivery,
  type ProviderAnswer,
} from "../src/delivery-policy.js";

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
  t.match(
    decideDelivery({ ...base, attemptsUsed: 1, deliverByMs: 75, results: [{ key: "k0", result: r("transient") }] }),
    { action: "expire", settled: [], accepted: [] },
    "a retry that would come at the deadline expires instead",
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
          return input.deliverByMs !== null;
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
      if (decision.action === "retry" || decision.action === "park" || decision.action === "expire") return false;
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
