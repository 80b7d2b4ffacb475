import fc from "fast-check";
import t from "tap";
import { TemplateRenderError } from "../../src/template/problems.js";
import { createRuntime, TEMPLATE_RENDER_LIMITS } from "../../src/template/runtime.js";

// The runtime the generated code calls: reads of the data's own properties only, and the
// limits that end every render.

t.test("get reads own properties, and the length of arrays and strings, nothing inherited", async (t) => {
  const n = createRuntime();
  t.equal(n.get({ a: { b: [1, { c: "x" }] } }, ["a", "b", 1, "c"], "it.a.b[1].c"), "x");
  t.equal(n.get({ s: "abc" }, ["s", "length"], "it.s.length"), 3);
  t.equal(n.get({ l: [1, 2] }, ["l", "length"], "it.l.length"), 2);
  t.equal(n.get({}, ["toString"], "it.toString"), undefined);
  t.equal(n.get({}, ["constructor"], "it.constructor"), undefined);
  t.equal(n.get("abc", ["0"], "it[0]"), undefined, "not the characters of a string");
  t.equal(n.get(Object.create({ inherited: 1 }), ["inherited"], "it.inherited"), undefined);
  t.equal(n.get({ a: { length: 7 } }, ["a", "length"], "it.a.length"), 7, "an own length key");
  t.equal(n.get({ a: null }, ["a"], "it.a"), null);
  t.throws(() => n.get({}, ["a", "b"], "it.a.b"), new TemplateRenderError('it.a.b: a value before "b" is missing'));
  t.throws(
    () => n.get({ a: null }, ["a", "b"], "it.a.b"),
    new TemplateRenderError('it.a.b: a value before "b" is null'),
  );
});

t.test("loops walk arrays only and count every iteration of the render", async (t) => {
  const n = createRuntime();
  t.same(n.each("abc"), []);
  t.same(n.each({ length: 2 }), []);
  const half = new Array(TEMPLATE_RENDER_LIMITS.iterations / 2).fill(0);
  t.equal(n.each(half), half);
  t.equal(n.each(half), half);
  t.throws(() => n.each([1]), TemplateRenderError);
  t.doesNotThrow(() => createRuntime().each([1]), "a fresh runtime counts from zero");
});

t.test("output is limited across the render", async (t) => {
  const n = createRuntime();
  t.equal(n.out("x".repeat(TEMPLATE_RENDER_LIMITS.outputChars)), "x".repeat(TEMPLATE_RENDER_LIMITS.outputChars));
  t.throws(() => n.out("y"), TemplateRenderError);
  t.doesNotThrow(() => n.step(TEMPLATE_RENDER_LIMITS.outputChars));
  t.throws(() => n.step(TEMPLATE_RENDER_LIMITS.outputChars + 1), TemplateRenderError);
  t.equal(createRuntime().out(null), "");
  t.equal(createRuntime().out({ a: 1 }), '{"a":1}');
});

t.test("comparisons other than === and !== hold between two numbers or two strings only", async (t) => {
  const { cmp } = createRuntime();
  t.equal(cmp("<", 1, 2), true);
  t.equal(cmp(">=", "b", "a"), true);
  t.equal(cmp("<=", 2, 2), true);
  t.equal(cmp(">", 3, 2), true);
  t.equal(cmp("<", 1, "2"), false);
  t.equal(cmp(">=", null, null), false);
  t.equal(cmp("<", [1], [2]), false);
});

t.test("property: a read never reaches a function, whatever the data and the path", async (t) => {
  const inherited = fc.constantFrom(
    "constructor",
    "toString",
    "valueOf",
    "hasOwnProperty",
    "__proto__",
    "length",
    "map",
  );
  fc.assert(
    fc.property(
      fc.anything({ withBigInt: true, withMap: true, withSet: true, withTypedArray: true }),
      fc.array(fc.oneof(inherited, fc.string({ maxLength: 4 }), fc.nat({ max: 3 })), { minLength: 1, maxLength: 4 }),
      (data, steps) => {
        try {
          const value = createRuntime().get(data, steps, "it");
          if (typeof value === "function") throw new Error(`${JSON.stringify(steps)} reached a function`);
        } catch (error) {
          if (!(error instanceof TemplateRenderError)) throw error;
        }
      },
    ),
    { numRuns: 5000 },
  );
  t.pass("5000 reads");
});
