import { randomUUID } from "node:crypto";
import { type Bus, claimGuard, isClaimable, isWrongLastSequence, readGuard, settleGuard } from "@notify/bus";
import { type GuardValue, guardKey } from "@notify/core";
import { freshBus } from "@notify/testing";
import t from "tap";

// The send guard's compare-and-set against the real NATS KV: however many claim at once, one wins.
const bus: Bus = await freshBus(t, 1);
const kv = await bus.kv("notify_send_guard");
const claim = (worker: string, attempt = 1): GuardValue => ({ state: "sending", at: Date.now(), attempt, worker });

t.test("a key never claimed reads as null and is claimable", async (t) => {
  const entry = await readGuard(kv, guardKey(randomUUID(), "email"));
  t.equal(entry, null);
  t.ok(isClaimable(entry));
});

t.test("concurrent first claims: exactly one wins, the others are told to look again", async (t) => {
  const key = guardKey(randomUUID(), "email");
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => claimGuard(kv, key, null, claim(`w${i}`))));
  const winners = results.filter((r) => r !== null);
  t.equal(winners.length, 1, "one claim");
  const stored = await readGuard(kv, key);
  t.same(stored?.value.worker, winners[0]?.value.worker, "the winner's value is the one stored");
  t.equal(stored?.revision, winners[0]?.revision);
  t.notOk(isClaimable(stored), "a guard being sent is not claimable");
});

t.test("a claim on a stale revision loses; concurrent reclaims of a failed guard: one wins", async (t) => {
  const key = guardKey(randomUUID(), "sms");
  const first = await claimGuard(kv, key, null, claim("a"));
  t.ok(first);
  await settleGuard(kv, key, { state: "failed", at: Date.now(), attempt: 1, worker: "a", reason: "refused" });
  t.equal(await claimGuard(kv, key, first, claim("late", 2)), null, "the revision read before the settle is stale");
  const failed = await readGuard(kv, key);
  t.ok(isClaimable(failed), "a failed guard is claimable");
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => claimGuard(kv, key, failed, claim(`r${i}`, 2))),
  );
  t.equal(results.filter((r) => r !== null).length, 1, "one reclaim");
  t.equal((await readGuard(kv, key))?.value.state, "sending");
});

t.test("isWrongLastSequence tells a lost race from other errors", async (t) => {
  const key = guardKey(randomUUID(), "push");
  await kv.create(key, new TextEncoder().encode("{}"));
  const lost = await kv.create(key, new TextEncoder().encode("{}")).catch((e: unknown) => e);
  t.ok(isWrongLastSequence(lost), "a create on an existing key");
  t.notOk(isWrongLastSequence(new Error("wrong last sequence")), "never by message text");
  t.notOk(isWrongLastSequence(undefined));
});
