import fc from "fast-check";
import t from "tap";
import {
  CHANNEL_STATUSES,
  type ChannelStatus,
  cancelByGuard,
  cancelByStatus,
  canTransition,
  decideResume,
  GUARD_STATES,
  type GuardValue,
  SENDABLE,
} from "../src/index.js";

const guardValue = fc.record({
  state: fc.constantFrom(...GUARD_STATES),
  at: fc.nat(),
  attempt: fc.nat({ max: 5 }),
  accepted: fc.option(fc.array(fc.record({ key: fc.string(), provider_id: fc.string() }), { maxLength: 2 }), {
    nil: undefined,
  }),
});

t.test("a channel's status: only a waiting one goes on to its guard", async (t) => {
  for (const status of CHANNEL_STATUSES) {
    const step = cancelByStatus(status);
    if (SENDABLE.includes(status)) t.same(step, { action: "guard" }, `${status}: the guard decides`);
    else if (status === "canceled") t.same(step, { action: "already_canceled" });
    else t.equal(step.action, "keep", `${status} stays as it is`);
    // Whatever the guard then says, the move it leads to is one the status table allows.
    if (step.action === "guard") t.ok(canTransition(status, "canceled"));
  }
  t.match(cancelByStatus("unsettled"), { why: /may have accepted/ });
  t.match(cancelByStatus("delivered"), { why: "already delivered" });
});

t.test("a guard is taken only where no worker holds it or held it to a send", async (t) => {
  fc.assert(
    fc.property(fc.option(guardValue, { nil: null }), (guard) => {
      const step = cancelByGuard(guard as GuardValue | null);
      if (guard === null) return step.action === "take";
      if (guard.state === "canceled") return step.action === "already_canceled";
      if (guard.state === "failed") return step.action === ((guard.accepted?.length ?? 0) > 0 ? "keep" : "take");
      return step.action === "keep" && step.why.length > 0;
    }),
    { numRuns: 1000 },
  );
  t.pass();
});

t.test("a worker that finds the guard canceled sends nothing", async (t) => {
  for (const idempotent of [false, true]) {
    t.same(
      decideResume({
        guard: { state: "canceled", at: 0, attempt: 0 },
        idempotent,
        claimTtlMs: 1000,
        now: 10_000_000,
        random: () => 0,
      }),
      { action: "canceled" },
      "however old the guard, and even at a provider that ignores repeats",
    );
  }
});

// The send guard's compare-and-set under every interleaving of one cancel and one worker (a
// model of the KV: a value and a revision). Each atomic step is one KV operation; the schedule
// says whose step comes next. Whatever the order: the channel is never both canceled and sent,
// and exactly one of the two gets its way.
type Entry = { value: GuardValue; revision: number } | null;

interface Kv {
  entry: Entry;
  revision: number;
}

/** A compare-and-set: a create when `seen` is null, else an update at its revision. */
function cas(kv: Kv, seen: Entry, value: GuardValue): boolean {
  const current = kv.entry?.revision ?? null;
  if ((seen?.revision ?? null) !== current) return false;
  kv.revision += 1;
  kv.entry = { value, revision: kv.revision };
  return true;
}

/** One actor as a generator of atomic KV steps; its result when done. */
function* cancel(kv: Kv): Generator<void, "canceled" | "kept", void> {
  for (let tries = 0; tries < 3; tries++) {
    const seen = kv.entry;
    yield;
    const step = cancelByGuard(seen?.value ?? null);
    if (step.action === "already_canceled") return "canceled";
    if (step.action === "keep") return "kept";
    const ok = cas(kv, seen, { state: "canceled", at: 0, attempt: seen?.value.attempt ?? 0 });
    yield;
    if (ok) return "canceled";
  }
  return "kept";
}

function* worker(kv: Kv): Generator<void, "sent" | "not_sent" | "retry", void> {
  for (let tries = 0; tries < 2; tries++) {
    const seen = kv.entry;
    yield;
    const claimable = seen === null || seen.value.state === "failed";
    if (!claimable) {
      const decision = decideResume({
        guard: (seen as NonNullable<Entry>).value,
        idempotent: false,
        claimTtlMs: 1000,
        now: 0,
        random: () => 0,
      });
      return decision.action === "canceled" ? "not_sent" : "retry";
    }
    const ok = cas(kv, seen, { state: "sending", at: 0, attempt: 1 });
    yield;
    if (ok) {
      // The provider is called under the claim; then the guard records the send.
      kv.revision += 1;
      kv.entry = { value: { state: "sent", at: 0, attempt: 1 }, revision: kv.revision };
      return "sent";
    }
  }
  return "retry";
}

t.test("a cancel and a worker at the same guard: never both canceled and sent", async (t) => {
  const start = fc.constantFrom<Entry>(null, { value: { state: "failed", at: 0, attempt: 1 }, revision: 1 });
  fc.assert(
    fc.property(start, fc.array(fc.boolean(), { maxLength: 12 }), (initial, schedule) => {
      const kv: Kv = { entry: initial, revision: initial?.revision ?? 0 };
      const actors = { c: cancel(kv), w: worker(kv) };
      let canceled: string | undefined;
      let sent: string | undefined;
      let turn = 0;
      while (canceled === undefined || sent === undefined) {
        const cancelsTurn = canceled === undefined && (sent !== undefined || (schedule[turn++] ?? true));
        if (cancelsTurn) {
          const next = actors.c.next();
          if (next.done) canceled = next.value;
        } else {
          const next = actors.w.next();
          if (next.done) sent = next.value;
        }
      }
      if (canceled === "canceled" && sent === "sent") return false;
      // One of them got its way: the cancel, or the send it then leaves alone.
      return (canceled === "canceled") !== (sent === "sent");
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

t.test("every status a cancel leaves a channel in is one it may take", async (t) => {
  const status = fc.constantFrom(...CHANNEL_STATUSES);
  fc.assert(
    fc.property(status, fc.option(guardValue, { nil: null }), (from: ChannelStatus, guard) => {
      const byStatus = cancelByStatus(from);
      if (byStatus.action !== "guard") return true;
      const byGuard = cancelByGuard(guard as GuardValue | null);
      return byGuard.action === "keep" || canTransition(from, "canceled");
    }),
  );
  t.pass();
});
