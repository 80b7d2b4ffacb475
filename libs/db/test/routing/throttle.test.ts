import { randomUUID } from "node:crypto";
import { type ThrottleSlot, throttleAllows } from "@notify/core";
import { freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { lockThrottles, type ThrottleTake, takeThrottleSlot } from "../../src/routing/throttle.js";

// Throttle slots in Postgres: the same sliding-window decision as throttleAllows, one key at a
// time under the key's advisory lock.
const { database } = await freshDatabase(t);
const { sql } = database;
const base = Date.parse("2026-06-01T12:00:00Z");

const take = (over: Partial<ThrottleTake> & Pick<ThrottleTake, "userId" | "notificationId">): ThrottleTake => ({
  clientId: "c",
  key: "k",
  limit: 1,
  perMs: 60_000,
  at: new Date(base),
  ...over,
});

t.test("Postgres decides as throttleAllows does, request after request, per (user, key)", async (t) => {
  const step = fc.record({
    user: fc.constantFrom("u1", "u2"),
    key: fc.constantFrom("k1", "k2"),
    id: fc.constantFrom("a", "b", "c", "d", "e", "f"),
    at: fc.integer({ min: 0, max: 300 }),
  });
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 100 }),
      fc.array(step, { maxLength: 14 }),
      async (limit, perMs, steps) => {
        const run = randomUUID();
        const model = new Map<string, ThrottleSlot[]>();
        for (const s of steps) {
          const userId = `${run}-${s.user}`;
          const slots = model.get(`${userId} ${s.key}`) ?? [];
          model.set(`${userId} ${s.key}`, slots);
          const at = base + s.at;
          const expected = throttleAllows(slots, s.id, at, { limit, perMs });
          const held = slots.some((x) => x.notificationId === s.id);
          if (expected && !held) slots.push({ notificationId: s.id, at });
          const got = await sql.begin((tx) =>
            takeThrottleSlot(tx, take({ userId, key: s.key, notificationId: s.id, limit, perMs, at: new Date(at) })),
          );
          if (got.granted !== expected || got.fresh !== (expected && !held)) return false;
        }
        return true;
      },
    ),
    { numRuns: 40 },
  );
  t.pass("decisions agree");
});

t.test("a routing of the key waits for the one in progress, then counts its slot", async (t) => {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let firstTaken: () => void = () => {};
  const taken = new Promise<void>((resolve) => {
    firstTaken = resolve;
  });
  const first = sql.begin(async (tx) => {
    const result = await takeThrottleSlot(tx, take({ userId: "wait", notificationId: "one" }));
    firstTaken();
    await held;
    return result;
  });
  await taken;
  let settled = false;
  const second = sql
    .begin((tx) => takeThrottleSlot(tx, take({ userId: "wait", notificationId: "two" })))
    .finally(() => {
      settled = true;
    });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(settled, false, "the second waits on the key's lock");
  const other = await sql.begin((tx) =>
    takeThrottleSlot(tx, take({ userId: "wait", key: "other", notificationId: "x" })),
  );
  t.same(other, { granted: true, fresh: true }, "another key does not wait");
  release();
  t.same(await first, { granted: true, fresh: true });
  t.same(await second, { granted: false, fresh: false }, "it counts the first one's committed slot");
});

t.test("a release locks its notifications' throttle keys for its whole transaction", async (t) => {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, throttle)
    values (${id}, 'c', 'locked', 'promo', 'welcome', 'promotional', ${sql.json({})}, ${id}, 'h', 0,
            ${sql.json({ key: "k", limit: 1, per: "1m" })})`;
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked: () => void = () => {};
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const releasing = sql.begin(async (tx) => {
    await lockThrottles(tx, [id, randomUUID()]);
    locked();
    await held;
  });
  await isLocked;
  let settled = false;
  const routing = sql
    .begin((tx) => takeThrottleSlot(tx, take({ userId: "locked", notificationId: "r" })))
    .finally(() => {
      settled = true;
    });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(settled, false, "the same key as takeThrottleSlot locks");
  release();
  await releasing;
  t.same(await routing, { granted: true, fresh: true });
});
