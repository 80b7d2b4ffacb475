import fc from "fast-check";
import t from "tap";
import {
  type EtaAstNode,
  generateAst,
  safeTemplateSettings,
  templateEngineOptions,
} from "../../src/template/compile.js";
import { TEMPLATE_FILTERS } from "../../src/template/filters.js";
import { TemplateRenderError, TemplateSyntaxError } from "../../src/template/problems.js";
import { createRuntime } from "../../src/template/runtime.js";
import { type EtaNode, tagSoup, template } from "./arbitraries.js";

// Code generation alone (rendering through eta is tested in
// apps/processor/test/template-escape.test.ts): the code that replaces each tag, that it names
// nothing but the runtime whatever the author wrote, and that it refuses every tag outside the
// grammar however eta split the template.

const generated = (...nodes: EtaAstNode[]) =>
  generateAst(nodes).map((node) => (typeof node === "string" ? node : node.val));

const refusal = (nodes: EtaAstNode[]): TemplateSyntaxError => {
  try {
    generateAst(nodes);
  } catch (error) {
    if (error instanceof TemplateSyntaxError) return error;
    throw error;
  }
  throw new Error(`compiled: ${JSON.stringify(nodes)}`);
};

/**
 * The code eta's compileBody assembles from the nodes (text appended, interpolations appended
 * through the escape function, statements as they are), run with a fresh runtime.
 */
function assemble(nodes: EtaAstNode[]): (it: unknown) => string {
  const body = nodes
    .map((node) => {
      if (typeof node === "string") return `__eta.res+=${JSON.stringify(node)};\n`;
      return node.t === "i" ? `__eta.res+=__eta.e(${node.val});\n` : `${node.val}\n`;
    })
    .join("");
  const fn = new Function("it", "__n", `let __eta = {res: "", e: (s) => s};\n${body}return __eta.res;`);
  return (it) => fn(it, createRuntime()) as string;
}

/** The names generated code may use: the data, loop variables, the runtime and the keywords. */
const RUNTIME_NAMES = new Set([
  "it",
  "__n",
  "get",
  "f",
  "out",
  "each",
  "step",
  "cmp",
  "__eta",
  "res",
  "length",
  "if",
  "else",
  "for",
  "const",
  "of",
  "true",
  "false",
  "null",
  ...Object.keys(TEMPLATE_FILTERS),
]);

/** Why a piece of generated code could do more than read data, or null when it cannot. */
function beyondTheRuntime(code: string): string | null {
  const bare = code.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/(?<![\w$])\d+(?:\.\d+)?(?:e[+-]?\d+)?/g, "0");
  for (const name of bare.match(/[A-Za-z_$][\w$]*/g) ?? []) {
    if (!RUNTIME_NAMES.has(name) && !/^__v\d+$/.test(name)) return `names ${name}`;
  }
  if (/[`'\\/]/.test(bare)) return "holds a quote, backslash or slash outside a JSON string";
  if (bare.replace(/===|!==|<=|>=/g, "").includes("=")) return "assigns";
  return null;
}

t.test("each tag compiles to calls into the runtime", async (t) => {
  t.same(generated("Hi ", { t: "i", val: "upper(it.a.b)" }), [
    "Hi ",
    '__n.out(__n.f.upper(__n.get(it,["a","b"],"it.a.b")))',
  ]);
  t.same(generated({ t: "i", val: "it" }), ["__n.out(it)"]);
  t.same(generated({ t: "i", val: 'fallback(it.x, "a\'b")' }), [
    '__n.out(__n.f.fallback(__n.get(it,["x"],"it.x"),"a\'b"))',
  ]);
  t.same(
    generated(
      { t: "e", val: 'if (it.a === "x" || !it.b) {' },
      { t: "e", val: "} else if (it.n < 2) {" },
      { t: "e", val: "} else {" },
      { t: "e", val: "for (const item of it.items) {" },
      { t: "i", val: "number(item.price, 2)" },
      { t: "e", val: "}" },
      { t: "e", val: "}" },
      { t: "e", val: "" },
    ),
    [
      'if (((__n.get(it,["a"],"it.a")==="x")||!(__n.get(it,["b"],"it.b")))) {',
      '} else if (__n.cmp("<",__n.get(it,["n"],"it.n"),2)) {',
      "} else {",
      'for (const __v0 of __n.each(__n.get(it,["items"],"it.items"))) { __n.step(__eta.res.length);',
      '__n.out(__n.f.number(__n.get(__v0,["price"],"item.price"),2))',
      "}",
      "}",
      "",
    ],
  );
});

t.test("tags outside the grammar do not compile, however eta split them", async (t) => {
  t.match(refusal([{ t: "r", val: "it.html" }]), {
    message: /only <%= %> and <% %> tags are allowed/,
    problem: { token: "r" },
  });
  t.match(refusal([{ t: "i", val: "it.a %> <%= it.b" }]), { message: /the tag ends before eta ends it/ });
  t.match(refusal([{ t: "e", val: "if (it.a) {" }]), { message: /this if is never closed/ });
  t.match(refusal([{ t: "e", val: "}" }]), { message: /closes no open if or for/ });
  t.match(refusal([{ t: "e", val: "} globalThis.__pwned = 1; {" }]), { problem: { token: "globalThis" } });
  for (const val of [
    "process.exit(1)",
    "it.constructor.constructor('return process')()",
    "this.config",
    "__eta.res",
    "options",
    "include('x')",
    "`$" + "{1}`",
    'fallback(it.x, "\\u0022")',
  ]) {
    for (const tt of ["i", "e"]) t.type(refusal([{ t: tt, val }]), TemplateSyntaxError, `${tt}: ${val}`);
  }
});

t.test("property: a template of the grammar compiles to code that names only the runtime, and renders", async (t) => {
  const data = fc.oneof(fc.jsonValue(), fc.dictionary(fc.constantFrom("a", "items", "x", "name"), fc.jsonValue()));
  fc.assert(
    fc.property(template([], 3), data, ({ nodes }, it) => {
      const out = generateAst(nodes as EtaAstNode[]);
      for (const node of out) {
        if (typeof node === "string") continue;
        const problem = beyondTheRuntime(node.val);
        if (problem) throw new Error(`${node.val} ${problem}`);
      }
      try {
        const text = assemble(out)(it);
        if (typeof text !== "string") throw new Error("no text");
      } catch (error) {
        if (!(error instanceof TemplateRenderError)) throw error;
      }
    }),
    { numRuns: 500 },
  );
  t.pass("500 templates");
});

t.test("property: any other tag is refused with a TemplateSyntaxError or names only the runtime", async (t) => {
  const node: fc.Arbitrary<EtaAstNode> = fc.oneof(
    fc.string({ maxLength: 10 }),
    fc.record({ t: fc.constantFrom("i", "e", "r"), val: fc.oneof(tagSoup, fc.string({ maxLength: 60 })) }),
  );
  fc.assert(
    fc.property(fc.array(node, { maxLength: 6 }), (nodes) => {
      let out: EtaAstNode[];
      try {
        out = generateAst(nodes);
      } catch (error) {
        if (error instanceof TemplateSyntaxError) return;
        throw error;
      }
      for (const item of out) {
        if (typeof item === "string") continue;
        const problem = beyondTheRuntime(item.val);
        if (problem) throw new Error(`${item.val} ${problem}`);
      }
    }),
    { numRuns: 5000 },
  );
  t.pass("5000 node lists");
});

t.test("renders: loops, conditions and filters over the data", async (t) => {
  const render = (nodes: EtaNode[], it: unknown) => assemble(generateAst(nodes as EtaAstNode[]))(it);
  const nodes: EtaNode[] = [
    { t: "e", val: "for (const item of it.items) {" },
    { t: "e", val: "if (item.n > 1) {" },
    { t: "i", val: "upper(item.name)" },
    { t: "e", val: "} else {" },
    { t: "i", val: 'fallback(item.name, "-")' },
    { t: "e", val: "}" },
    ",",
    { t: "e", val: "}" },
  ];
  t.equal(render(nodes, { items: [{ name: "a", n: 2 }, { n: 1 }, { name: "c", n: "9" }] }), "A,-,c,");
  t.equal(render(nodes, { items: "not a list" }), "");
  t.throws(() => render([{ t: "i", val: "it.a.b" }], {}), TemplateRenderError, "a read through a missing value");
  t.equal(render([{ t: "i", val: "it.a" }], {}), "", "a missing value prints nothing");
});

t.test("the eta settings check the source, then compile every tag from the tree", async (t) => {
  const settings = safeTemplateSettings();
  const [plugin] = settings.plugins;
  t.equal(plugin?.processTemplate("Hi <%= it.name %>"), "Hi <%= it.name %>");
  t.throws(() => plugin?.processTemplate("Hi\n<%= it.name.constructor %>"), {
    name: "TemplateSyntaxError",
    problem: { line: 2, column: 13, token: "constructor" },
  });
  t.equal(plugin?.processAST, generateAst);
  t.equal(settings.functionHeader, "const __n = this.config.notifyTemplateRuntime();");
  t.not(settings.notifyTemplateRuntime(), settings.notifyTemplateRuntime(), "a fresh runtime for every render");
  t.match(templateEngineOptions(true), { autoEscape: true, autoTrim: false, useWith: false, varName: "it" });
  t.match(templateEngineOptions(false), { autoEscape: false, plugins: [{ processAST: generateAst }] });
});
