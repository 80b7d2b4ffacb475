import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import t from "tap";
import { Lexer } from "../../src/template/lex.js";
import { Blocks, type Scope, type Statement, TagParser } from "../../src/template/parse.js";
import { Refusal } from "../../src/template/problems.js";
import { anySource, expr, LOOP_NAMES, statement, tagSoup, template } from "./arbitraries.js";

// The parser alone: the tree it reads from one tag, the block structure across tags, and that
// whatever it is given it either reads the grammar back exactly or refuses with a position.

const parser = (source: string, scope: Scope = []) => new TagParser(new Lexer(`${source} %>`, 0), scope);
const interpolation = (source: string, scope: Scope = []) => parser(source, scope).interpolation();
const statementOf = (source: string, scope: Scope = []) => parser(source, scope).statement();

const refusal = (read: () => unknown): Refusal => {
  try {
    read();
  } catch (error) {
    if (error instanceof Refusal) return error;
    throw error;
  }
  throw new Error("read without a refusal");
};

t.test("paths, filters and literals read to their trees", async (t) => {
  t.same(interpolation("it"), { k: "path", root: -1, steps: [], label: "it" });
  t.same(interpolation("it.a[0].b"), { k: "path", root: -1, steps: ["a", 0, "b"], label: "it.a[0].b" });
  t.same(interpolation("row.name", ["item", "row"]), { k: "path", root: 1, steps: ["name"], label: "row.name" });
  t.same(interpolation('fallback(upper(it.x), "none")'), {
    k: "call",
    name: "fallback",
    arg: { k: "call", name: "upper", arg: { k: "path", root: -1, steps: ["x"], label: "it.x" }, extra: [] },
    extra: ["none"],
  });
  t.same(interpolation("number(it.total, 2)"), {
    k: "call",
    name: "number",
    arg: { k: "path", root: -1, steps: ["total"], label: "it.total" },
    extra: [2],
  });
});

t.test("conditions: ! binds looser than a comparison, && tighter than ||", async (t) => {
  const a = { k: "path", root: -1, steps: ["a"], label: "it.a" };
  const b = { k: "path", root: -1, steps: ["b"], label: "it.b" };
  const c = { k: "path", root: -1, steps: ["c"], label: "it.c" };
  t.same(statementOf("if (!it.a === 1) {"), {
    k: "if",
    cond: { k: "not", cond: { k: "cmp", op: "===", a, b: { k: "lit", value: 1 } } },
  });
  t.same(statementOf("if (it.a || it.b && it.c) {"), {
    k: "if",
    cond: {
      k: "or",
      items: [
        { k: "value", expr: a },
        {
          k: "and",
          items: [
            { k: "value", expr: b },
            { k: "value", expr: c },
          ],
        },
      ],
    },
  });
  t.same(statementOf("} else if (it.a !== null) {").k, "elseif");
  t.same(statementOf("} else {"), { k: "else" });
  t.same(statementOf("}"), { k: "close" });
  t.same(statementOf(""), { k: "empty" });
  t.same(statementOf("for (const item of it.items) {"), {
    k: "for",
    name: "item",
    list: { k: "path", root: -1, steps: ["items"], label: "it.items" },
  });
});

t.test("refusals point at the token that leaves the grammar", async (t) => {
  t.match(
    refusal(() => interpolation("it.a.constructor")),
    { at: 5, token: "constructor" },
  );
  t.match(
    refusal(() => interpolation('"text"')),
    { at: 0, message: /print data/ },
  );
  t.match(
    refusal(() => interpolation("item.x")),
    { at: 0, message: /unknown name "item"/ },
  );
  t.match(
    refusal(() => statementOf("for (const item of it.a) {", ["item"])),
    {
      at: 11,
      message: '"item" is already a loop variable here',
    },
  );
  t.match(
    refusal(() => statementOf("for (const upper of it.a) {")),
    { at: 11, token: "upper" },
  );
  t.match(
    refusal(() => statementOf("if (it.a) { it.b")),
    { at: 12, message: "expected the end of the tag" },
  );
  t.match(
    refusal(() => interpolation("it.a it.b")),
    { at: 5, message: "expected the end of the tag" },
  );
  t.match(
    refusal(() => interpolation(`it${".a".repeat(33)}`)),
    { message: "the path is too long" },
  );
});

t.test("blocks: every if and for is closed, else follows an open if once", async (t) => {
  const run = (...statements: Statement[]) => {
    const blocks = new Blocks();
    statements.forEach((s, i) => {
      blocks.apply(s, i);
    });
    blocks.finish();
    return blocks;
  };
  const ifA = statementOf("if (it.a) {");
  const loop = statementOf("for (const item of it.a) {");
  t.doesNotThrow(() =>
    run(ifA, { k: "elseif", cond: { k: "value", expr: { k: "lit", value: 1 } } }, { k: "else" }, { k: "close" }),
  );
  const open = new Blocks();
  open.apply(ifA, 0);
  open.apply(loop, 1);
  t.same(open.scope, ["item"]);
  t.equal(open.loopDepth, 1);
  t.match(
    refusal(() => open.finish()),
    { at: 1, message: "this for is never closed with <% } %>", token: "for" },
  );
  t.match(
    refusal(() => run({ k: "close" })),
    { at: 0, message: "} closes no open if or for" },
  );
  t.match(
    refusal(() => run(loop, { k: "else" })),
    { at: 1, message: "else without an open if" },
  );
  t.match(
    refusal(() => run(ifA, { k: "else" }, { k: "else" })),
    { at: 2, message: "else after the else of this if" },
  );
  t.match(
    refusal(() => run(...Array.from({ length: 33 }, () => ifA))),
    { at: 32, message: "blocks nest too deeply" },
  );
});

const scopes = fc
  .subarray(LOOP_NAMES, { maxLength: 3 })
  .chain((names) => fc.shuffledSubarray(names, { minLength: names.length }));

t.test("property: an interpolation of the grammar reads back to the tree it was written from", async (t) => {
  fc.assert(
    fc.property(
      scopes.chain((scope) => fc.tuple(fc.constant(scope), expr(scope, 3, false))),
      ([scope, { source, tree }]) => {
        const read = parser(source, scope);
        const parsed = read.interpolation();
        if (!isDeepStrictEqual(parsed, tree)) throw new Error(`${JSON.stringify(parsed)} from ${source}`);
        if (read.endToken.at !== source.length + 1) throw new Error(`end at ${read.endToken.at}`);
      },
    ),
    { numRuns: 2000 },
  );
  t.pass("2000 interpolations");
});

t.test("property: a statement of the grammar reads back to the tree it was written from", async (t) => {
  fc.assert(
    fc.property(
      scopes.chain((scope) => fc.tuple(fc.constant(scope), statement(scope))),
      ([scope, { source, tree }]) => {
        const read = parser(source, scope);
        const parsed = read.statement();
        if (!isDeepStrictEqual(parsed, tree)) throw new Error(`${JSON.stringify(parsed)} from ${source}`);
        if (read.endToken.at !== source.length + 1) throw new Error(`end at ${read.endToken.at}`);
      },
    ),
    { numRuns: 2000 },
  );
  t.pass("2000 statements");
});

t.test("property: any other tag is read or refused with a Refusal at a position inside it", async (t) => {
  fc.assert(
    fc.property(fc.oneof(anySource, tagSoup), scopes, fc.boolean(), (body, scope, isInterpolation) => {
      const source = `${body} %>`;
      try {
        const read = new TagParser(new Lexer(source, 0), scope);
        if (isInterpolation) read.interpolation();
        else read.statement();
        read.endToken;
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        if (!(error.at === -1 || (error.at >= 0 && error.at < source.length))) throw new Error(`at ${error.at}`);
        if (typeof error.message !== "string" || error.message === "") throw new Error("no reason");
      }
    }),
    { numRuns: 5000 },
  );
  t.pass("5000 tags");
});

t.test("property: the blocks of a template built from the grammar balance", async (t) => {
  fc.assert(
    fc.property(template([], 3), ({ nodes }) => {
      const blocks = new Blocks();
      for (const node of nodes) {
        if (typeof node === "string") continue;
        const read = new TagParser(new Lexer(`${node.val} %>`, 0), blocks.scope);
        if (node.t === "i") read.interpolation();
        else blocks.apply(read.statement(), read.start);
      }
      blocks.finish();
    }),
    { numRuns: 500 },
  );
  t.pass("500 templates");
});
