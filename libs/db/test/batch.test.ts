import assert from "node:assert/strict";
import fc from "fast-check";
import t from "tap";
import { MAX_BATCH, perIteration, rounds } from "../src/batch.js";

/** A `run` that records each statement it is given, how many ran at once, and answers `<key>!`. */
function recorder(fail?: (keys: readonly string[]) => unknown) {
  const statements: string[][] = [];
  let running = 0;
  let most = 0;
  const run = async (keys: readonly string[]) => {
    running++;
    most = Math.max(most, running);
    statements.push([...keys]);
    await new Promise((resolve) => setImmediate(resolve));
    running--;
    const error = fail?.(keys);
    if (error) throw error;
    return keys.map((k) => `${k}!`);
  };
  return { run, statements, most: () => most };
}

const name = (key: string) => key.split("#")[0] as string;

t.test("the calls of one iteration make one statement; of later iterations, their own", async (t) => {
  const r = recorder();
  const load = perIteration(r.run);
  t.same(await Promise.all(["a", "b", "a"].map(load)), ["a!", "b!", "a!"]);
  t.same(await load("c"), "c!");
  t.same(r.statements, [["a", "b", "a"], ["c"]]);
});

t.test("reads beyond the statement size go in several statements, all answered", async (t) => {
  const r = recorder();
  const load = perIteration(r.run);
  const keys = Array.from({ length: MAX_BATCH * 2 + 3 }, (_, i) => `k${i}`);
  t.same(
    await Promise.all(keys.map(load)),
    keys.map((k) => `${k}!`),
  );
  t.same(
    r.statements.map((s) => s.length),
    [MAX_BATCH, MAX_BATCH, 3],
  );
  t.equal(r.most(), 1, "one after another: a large batch does not take the whole pool");
});

t.test("a limit of batches in flight below one is refused, not a wait for good", async (t) => {
  for (const inFlight of [0, -1, 1.5, Number.NaN])
    t.throws(() => perIteration(recorder().run, { inFlight }), RangeError);
});

t.test("writes: each name's calls keep their order across rounds and statements, one at a time", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.constantFrom("a", "b", "c", "d", "e"), { maxLength: 40 }),
      fc.boolean(),
      async (names, large) => {
        // With `large`, enough distinct names first that a round outgrows one statement.
        const filler = large ? Array.from({ length: MAX_BATCH + 5 }, (_, i) => `f${i}`) : [];
        const keys = [...filler, ...names].map((n, i) => `${n}#${i}`);
        const r = recorder();
        const load = perIteration(r.run, { writes: name });
        assert.deepStrictEqual(
          await Promise.all(keys.map(load)),
          keys.map((k) => `${k}!`),
        );
        assert.ok(r.most() <= 1, "statements of writes run one after the other");
        for (const statement of r.statements) {
          assert.ok(statement.length <= MAX_BATCH);
          assert.equal(new Set(statement.map(name)).size, statement.length, "no name twice in a statement");
        }
        const seen = r.statements.flat();
        assert.deepStrictEqual([...seen].sort(), [...keys].sort(), "every call ran once");
        for (const n of new Set(names)) {
          const mine = seen.filter((k) => name(k) === n);
          assert.deepStrictEqual(
            mine,
            keys.filter((k) => name(k) === n),
            `${n}'s calls in call order`,
          );
        }
      },
    ),
    { numRuns: 60 },
  );
  t.pass("held for every case");
});

t.test("writes: a failure about one row's data fails only its call", async (t) => {
  const bad = Object.assign(new Error("violates foreign key"), { code: "23503" });
  const r = recorder((keys) => (keys.includes("b") ? bad : undefined));
  const load = perIteration(r.run, { writes: (k) => k });
  const results = await Promise.allSettled(["a", "b", "c"].map(load));
  t.same(
    results.map((x) => (x.status === "fulfilled" ? x.value : (x.reason as { code: string }).code)),
    ["a!", "23503", "c!"],
  );
  t.same(r.statements, [["a", "b", "c"], ["a"], ["b"], ["c"]]);
});

t.test("writes: any other failure fails the statement's calls at once, without a retry", async (t) => {
  for (const code of ["57014", "08006", "40P01", undefined]) {
    const error = Object.assign(new Error("gone"), { code });
    const r = recorder(() => error);
    const load = perIteration(r.run, { writes: (k) => k });
    const results = await Promise.allSettled(["a", "b", "c"].map(load));
    t.same(
      results.map((x) => x.status === "rejected" && x.reason === error),
      [true, true, true],
      `code ${code}`,
    );
    t.equal(r.statements.length, 1, `code ${code}: not run again`);
  }
});

t.test("rounds: no name twice in a round, each name's calls in order", async (t) => {
  t.same(rounds(["a", "b", "a", "c", "a", "b"]), [[0, 1, 3], [2, 5], [4]]);
  t.same(rounds([]), []);
});

const nextIteration = () => new Promise((resolve) => setImmediate(resolve));

t.test(
  "while its batches in flight are at the limit, the calls of later iterations wait and go together",
  async (t) => {
    const statements: string[][] = [];
    const open: Array<() => void> = [];
    let running = 0;
    let most = 0;
    const run = async (keys: readonly string[]) => {
      statements.push([...keys]);
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => open.push(resolve));
      running--;
      return keys.map((k) => `${k}!`);
    };
    const load = perIteration(run, { inFlight: 2 });
    const answers: Array<Promise<string>> = [];
    // Five iterations of calls: the first two make a statement each, the next three wait together.
    for (const wave of [["a"], ["b", "c"], ["d"], ["e", "f"], ["g"]]) {
      answers.push(...wave.map(load));
      await nextIteration();
      await nextIteration();
    }
    t.same(statements, [["a"], ["b", "c"]], "two in flight, the rest held");
    open.shift()?.();
    await nextIteration();
    await nextIteration();
    t.same(statements.at(-1), ["d", "e", "f", "g"], "what waited goes in one statement once a slot frees");
    while (open.length > 0 || running > 0) {
      open.shift()?.();
      await nextIteration();
    }
    t.same(await Promise.all(answers), ["a!", "b!", "c!", "d!", "e!", "f!", "g!"]);
    t.equal(most, 2, "never more than two at once");
  },
);

/** A `run` whose statements stay open until the test lets them end, oldest first. */
function holding() {
  const statements: string[][] = [];
  const open: Array<() => void> = [];
  let running = 0;
  const run = async (keys: readonly string[]) => {
    statements.push([...keys]);
    running++;
    await new Promise<void>((resolve) => open.push(resolve));
    running--;
    return keys.map((k) => `${k}!`);
  };
  const endOne = async () => {
    open.shift()?.();
    await nextIteration();
    await nextIteration();
  };
  return { run, statements, endOne, running: () => running, open };
}

t.test("overlapAt: while one batch is in flight, the next waits for company, then goes at once", async (t) => {
  const h = holding();
  const load = perIteration(h.run, { inFlight: 2, overlapAt: 3, overlapMs: 60_000 });
  const answers = [load("a")];
  await nextIteration();
  t.same(h.statements, [["a"]], "nothing in flight: the first goes at once");
  for (const key of ["b", "c"]) {
    answers.push(load(key));
    await nextIteration();
    await nextIteration();
  }
  t.same(h.statements, [["a"]], "two waiting, fewer than overlapAt: held though a slot is free");
  answers.push(load("d"));
  t.same(h.statements, [["a"], ["b", "c", "d"]], "the third goes with them in the free slot, without waiting a turn");
  while (h.open.length > 0) await h.endOne();
  t.same(await Promise.all(answers), ["a!", "b!", "c!", "d!"]);
});

t.test("overlapAt: once nothing is in flight, the waiting ones go, however few", async (t) => {
  const h = holding();
  const load = perIteration(h.run, { overlapAt: 100, overlapMs: 60_000 });
  const answers = [load("a")];
  await nextIteration();
  answers.push(load("b"));
  await nextIteration();
  await nextIteration();
  t.same(h.statements, [["a"]]);
  await h.endOne();
  t.same(h.statements, [["a"], ["b"]]);
  await h.endOne();
  t.same(await Promise.all(answers), ["a!", "b!"]);
});

t.test(
  "overlapAt: a statement held up delays the calls behind it by overlapMs, then the free slot serves",
  async (t) => {
    const h = holding();
    const started: number[] = [];
    const run = (keys: readonly string[]) => {
      started.push(performance.now());
      return h.run(keys);
    };
    const load = perIteration(run, { overlapAt: 100, overlapMs: 30 });
    const answers = [load("a")];
    await nextIteration();
    const asked = performance.now();
    answers.push(load("b"));
    const deadline = Date.now() + 10_000;
    while (h.statements.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    t.same(h.statements, [["a"], ["b"]], "b went while a was still in flight");
    t.equal(h.running(), 2);
    // A timer never fires early, however loaded the machine: b waited its overlapMs for company.
    const held = (started[1] ?? 0) - asked;
    t.ok(held >= 29, `b was held for overlapMs (${held.toFixed(1)} ms)`);
    while (h.open.length > 0) await h.endOne();
    t.same(await Promise.all(answers), ["a!", "b!"]);
  },
);

t.test("overlapAt must be a whole number of at least one, overlapMs a finite one of at least zero", async (t) => {
  const run = async (keys: readonly string[]) => [...keys];
  for (const overlapAt of [0, -1, 1.5, Number.NaN]) t.throws(() => perIteration(run, { overlapAt }), RangeError);
  for (const overlapMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    t.throws(() => perIteration(run, { overlapMs }), RangeError);
  }
});

t.test("batches in flight never pass the limit; every call is answered once (fast-check)", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.array(fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 6 }), { maxLength: 12 }),
      fc.array(fc.nat(3), { minLength: 12, maxLength: 12 }),
      fc.boolean(),
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 0, max: 3 }),
      async (limit, waves, delays, writes, overlapAt, overlapMs) => {
        let running = 0;
        let most = 0;
        let calls = 0;
        const run = async (keys: readonly string[]) => {
          running++;
          most = Math.max(most, running);
          calls += keys.length;
          for (let i = 0; i < (delays[keys.length % delays.length] ?? 0); i++) await nextIteration();
          running--;
          return keys.map((k) => `${k}!`);
        };
        const load = perIteration(run, { inFlight: limit, overlapAt, overlapMs, ...(writes ? { writes: name } : {}) });
        const answers: Array<Promise<string>> = [];
        const keys: string[] = [];
        for (const [w, wave] of waves.entries()) {
          for (const [i, n] of wave.entries()) {
            const key = `${n}#${w}.${i}`;
            keys.push(key);
            answers.push(load(key));
          }
          await nextIteration();
        }
        // Thrown, not only reported, so that fast-check sees a failure and shrinks it.
        assert.deepStrictEqual(
          await Promise.all(answers),
          keys.map((k) => `${k}!`),
        );
        assert.ok(most <= limit, `at most ${limit} at once, saw ${most}`);
        assert.equal(calls, keys.length, "each call in exactly one statement");
      },
    ),
    { numRuns: 100 },
  );
  t.pass("held for every case");
});
