import type { KV } from "@nats-io/kv";
import { type Leases, startLeases } from "@notify/bus";
import { eventually, freshBus } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { targetOf } from "../src/leases.js";

// Leases over the real NATS KV: every name is worked on by exactly one live instance, never two
// at once, whether instances join, leave, or go silent (cut off from NATS).
const bus = await freshBus(t, 1);
const kv = await bus.kv("notify_leases");
const NAMES = Array.from({ length: 12 }, (_, i) => `lane.${i}`);
const TTL = 1200;
const TICK = 100;

/** Who works on what, when: a name started twice without a stop in between is a double hold. */
const working = new Map<string, string>();
const overlaps: string[] = [];
const history: string[] = [];

/**
 * A KV that fails every call while `cut` is set (an instance cut off from NATS), or, while `hang`
 * is set, answers nothing until a request timeout longer than the TTL (a node lost mid-request).
 */
function cuttable(inner: KV) {
  const state = { cut: false, hang: false };
  const proxy = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (state.cut) return Promise.reject(new Error("connection cut"));
        if (state.hang)
          return new Promise((_, reject) => setTimeout(() => reject(new Error("request timed out")), TTL * 3));
        return value.apply(target, args);
      };
    },
  });
  return { kv: proxy, state };
}

function instance(id: string) {
  const link = cuttable(kv);
  const leases: Leases = startLeases({
    kv: link.kv,
    id,
    names: NAMES,
    ttlMs: TTL,
    tickMs: TICK,
    async start(name) {
      const other = working.get(name);
      if (other !== undefined) overlaps.push(`${name}: ${id} started while ${other} held it`);
      working.set(name, id);
      history.push(`${id}+${name}`);
    },
    async stop(name) {
      await new Promise((resolve) => setTimeout(resolve, 30)); // draining takes a moment
      if (working.get(name) === id) working.delete(name);
      history.push(`${id}-${name}`);
    },
  });
  return { id, leases, link };
}
const settledOn = (ids: string[]) =>
  eventually(
    async () => {
      const holders = NAMES.map((n) => working.get(n));
      if (holders.some((h) => h === undefined || !ids.includes(h))) return undefined;
      return holders.every((h, i) => h === targetOf(NAMES[i] as string, ids)) ? holders : undefined;
    },
    TTL * 8,
    `every name on ${ids.join(", ")}`,
  );

t.test("names spread over the live instances, each worked on once, through joins, leaves and a silence", async (t) => {
  const a = instance("a");
  await settledOn(["a"]);
  t.equal(a.leases.held().length, NAMES.length, "alone, one instance holds every name");

  const b = instance("b");
  const c = instance("c");
  const spread = await settledOn(["a", "b", "c"]);
  for (const id of ["a", "b", "c"]) t.ok(spread.includes(id), `${id} holds a share`);

  // b leaves cleanly: its names move as soon as it has stopped their work.
  await b.leases.stop();
  await settledOn(["a", "c"]);

  // c is cut off from NATS: it stops its own work within half the TTL (before anyone may count it
  // dead), and a takes its names after the TTL.
  c.link.state.cut = true;
  await eventually(async () => (c.leases.held().length === 0 ? true : undefined), TTL, "c fenced itself");
  t.notOk(c.leases.healthy(), "c knows it is fenced");
  await settledOn(["a"]);

  // c's link comes back: it beats again and gets a share back.
  c.link.state.cut = false;
  await settledOn(["a", "c"]);
  t.ok(c.leases.healthy());

  await Promise.all([a.leases.stop(), c.leases.stop()]);
  t.same(overlaps, [], "no name was ever worked on by two instances at once");
  t.equal(working.size, 0, "stopping gives everything up");
  const holders = await kv.get("leases");
  t.same(holders?.json(), {}, "no lease left behind");
  t.comment(history.join(" "));
});

t.test("an instance whose requests hang fences itself before its names are taken over", async (t) => {
  overlaps.length = 0;
  const d = instance("d");
  const e = instance("e");
  await settledOn(["d", "e"]);
  // d's requests to NATS hang past the TTL: it must stop its work at half the TTL, not when a
  // request finally fails, or e would start d's names while d still works on them.
  d.link.state.hang = true;
  await eventually(async () => (d.leases.held().length === 0 ? true : undefined), TTL, "d fenced itself");
  t.notOk(d.leases.healthy());
  await settledOn(["e"]);
  d.link.state.hang = false;
  await settledOn(["d", "e"]);
  await Promise.all([d.leases.stop(), e.leases.stop()]);
  t.same(overlaps, [], "no name was ever worked on by two instances at once");
});

t.test("the spread is the same for every observer and moves only what it must", async (t) => {
  fc.assert(
    fc.property(fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,12}$/), { minLength: 2, maxLength: 8 }), (ids) => {
      const before = new Map(NAMES.map((n) => [n, targetOf(n, ids)]));
      t.same(
        NAMES.map((n) => targetOf(n, [...ids].reverse())),
        [...before.values()],
        "order of the member list does not matter",
      );
      const gone = ids[0] as string;
      const rest = ids.slice(1);
      for (const n of NAMES) {
        const was = before.get(n);
        if (was !== gone) t.equal(targetOf(n, rest), was, "a leave moves only the leaver's names");
      }
    }),
    { numRuns: 100 },
  );
});
