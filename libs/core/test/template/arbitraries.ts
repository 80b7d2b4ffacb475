import fc from "fast-check";
import { TEMPLATE_FILTERS, type TemplateFilterName } from "../../src/template/filters.js";
import { isForbiddenProperty } from "../../src/template/lex.js";
import type { Cond, Expr, Literal, Scope, Statement } from "../../src/template/parse.js";

// Generators shared by the template tests: strings built to stress the tokenizer, and
// templates of the grammar paired with the tree the parser must read from them.

// Strings built from the pieces that matter to the tokenizer, so that tags, quotes, markers,
// keywords and brackets meet in every order, besides plain random strings.
const pieces = fc.constantFrom(
  "<%",
  "<%=",
  "<%~",
  "<%-",
  "_%>",
  "-%>",
  "%>",
  " ",
  "\n",
  "it",
  ".",
  "name",
  "[0]",
  "[",
  "]",
  "(",
  ")",
  "{",
  "}",
  "if",
  "else",
  "for",
  "const",
  "x",
  "of",
  '"',
  "'",
  "`",
  "/*",
  "*/",
  "//",
  "\\",
  "===",
  "=",
  "!",
  "&&",
  "||",
  "<",
  "upper",
  "fallback",
  ",",
  "1",
  "-1",
  "constructor",
  "__proto__",
  "process",
);
export const tagSoup = fc.array(pieces, { maxLength: 40 }).map((parts) => parts.join(""));

/** Any string a template author could send: random, binary, or built from tag pieces. */
export const anySource = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 100 }),
  tagSoup,
);

/** A piece of the grammar as source text, with the tree the parser reads from it. */
export interface Sourced<T> {
  source: string;
  tree: T;
}

/** Loop variable names: valid, and none of the names the grammar keeps for itself. */
export const LOOP_NAMES = ["item", "row", "tag", "x", "line_item", "a1"];

const propertyName = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/).filter((name) => !isForbiddenProperty(name));

const stringLiteral: fc.Arbitrary<Sourced<Literal>> = fc
  .tuple(
    fc.string({ maxLength: 12 }).filter((s) => !/["'\\\n\r]/.test(s)),
    fc.constantFrom('"', "'"),
  )
  .map(([s, quote]) => ({ source: `${quote}${s}${quote}`, tree: s }));

const numberLiteral: fc.Arbitrary<Sourced<Literal>> = fc
  .tuple(
    fc.boolean(),
    fc.oneof(fc.constant("0"), fc.stringMatching(/^[1-9][0-9]{0,9}$/)),
    fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
  )
  .map(([negative, whole, decimals]) => {
    const text = `${negative ? "-" : ""}${whole}${decimals === undefined ? "" : `.${decimals}`}`;
    return { source: text, tree: Number(text) };
  });

const literal: fc.Arbitrary<Sourced<Literal>> = fc.oneof(
  stringLiteral,
  numberLiteral,
  fc.constantFrom<Sourced<Literal>>(
    { source: "true", tree: true },
    { source: "false", tree: false },
    { source: "null", tree: null },
  ),
);

/** A data path from `it` or a loop variable in scope. */
export const path = (scope: Scope): fc.Arbitrary<Sourced<Expr>> =>
  fc
    .tuple(
      fc.integer({ min: -1, max: scope.length - 1 }),
      fc.array(fc.oneof(propertyName, fc.nat({ max: 99 })), { maxLength: 4 }),
    )
    .map(([root, steps]) => {
      const label =
        (root < 0 ? "it" : scope[root]) + steps.map((s) => (typeof s === "number" ? `[${s}]` : `.${s}`)).join("");
      return { source: label, tree: { k: "path", root, steps, label } };
    });

/** The literals a filter takes after its value, as TEMPLATE_FILTERS describes them. */
const filterExtras = (name: TemplateFilterName): fc.Arbitrary<Array<Sourced<Literal>>> => {
  const spec = TEMPLATE_FILTERS[name];
  const kind = spec.args[0];
  const one =
    kind === "digits"
      ? fc.integer({ min: 0, max: 10 }).map((n): Sourced<Literal> => ({ source: String(n), tree: n }))
      : kind === "date-style"
        ? fc.constantFrom("date", "datetime", "iso").map((s): Sourced<Literal> => ({ source: `"${s}"`, tree: s }))
        : kind === "string"
          ? stringLiteral
          : literal;
  return fc.array(one, { minLength: spec.min, maxLength: spec.max });
};

const filterNames = Object.keys(TEMPLATE_FILTERS) as TemplateFilterName[];

/** An expression; `literals` says whether a bare literal may stand here (in conditions only). */
export const expr = (scope: Scope, depth: number, literals: boolean): fc.Arbitrary<Sourced<Expr>> => {
  const call: fc.Arbitrary<Sourced<Expr>> | null =
    depth <= 0
      ? null
      : fc
          .constantFrom(...filterNames)
          .chain((name) => fc.tuple(fc.constant(name), expr(scope, depth - 1, false), filterExtras(name)))
          .map(([name, arg, extra]) => ({
            source: `${name}(${[arg.source, ...extra.map((e) => e.source)].join(", ")})`,
            tree: { k: "call", name, arg: arg.tree, extra: extra.map((e) => e.tree) },
          }));
  const choices: Array<fc.Arbitrary<Sourced<Expr>>> = [path(scope)];
  if (call) choices.push(call);
  if (literals) choices.push(literal.map(({ source, tree }) => ({ source, tree: { k: "lit", value: tree } })));
  return fc.oneof(...choices);
};

/** Compound conditions are parenthesized inside others, so the parser reads the same nesting. */
const nested = (c: Sourced<Cond>) => (c.tree.k === "or" || c.tree.k === "and" ? `(${c.source})` : c.source);

export const cond = (scope: Scope, depth: number): fc.Arbitrary<Sourced<Cond>> => {
  const value = expr(scope, 2, true).map(
    (e): Sourced<Cond> => ({ source: e.source, tree: { k: "value", expr: e.tree } }),
  );
  const cmp = fc
    .tuple(expr(scope, 1, true), fc.constantFrom("===", "!==", "<", ">", "<=", ">="), expr(scope, 1, true))
    .map(
      ([a, op, b]): Sourced<Cond> => ({
        source: `${a.source} ${op} ${b.source}`,
        tree: { k: "cmp", op, a: a.tree, b: b.tree },
      }),
    );
  if (depth <= 0) return fc.oneof(value, cmp);
  const inner = cond(scope, depth - 1);
  const not = inner.map((c): Sourced<Cond> => ({ source: `!${nested(c)}`, tree: { k: "not", cond: c.tree } }));
  const joined = (k: "or" | "and") =>
    fc.array(inner, { minLength: 2, maxLength: 3 }).map(
      (items): Sourced<Cond> => ({
        source: items.map(nested).join(k === "or" ? " || " : " && "),
        tree: { k, items: items.map((c) => c.tree) },
      }),
    );
  return fc.oneof(value, cmp, not, joined("or"), joined("and"));
};

/** The inside of one `<% %>` tag, for a scope of loop variables. */
export const statement = (scope: Scope): fc.Arbitrary<Sourced<Statement>> => {
  const free = LOOP_NAMES.filter((name) => !scope.includes(name));
  const choices: Array<fc.Arbitrary<Sourced<Statement>>> = [
    cond(scope, 2).map((c) => ({ source: `if (${c.source}) {`, tree: { k: "if", cond: c.tree } })),
    cond(scope, 2).map((c) => ({ source: `} else if (${c.source}) {`, tree: { k: "elseif", cond: c.tree } })),
    fc.constant({ source: "} else {", tree: { k: "else" } }),
    fc.constant({ source: "}", tree: { k: "close" } }),
    fc.constant({ source: "", tree: { k: "empty" } }),
  ];
  if (free.length > 0) {
    choices.push(
      fc.tuple(fc.constantFrom(...free), path(scope)).map(([name, list]) => ({
        source: `for (const ${name} of ${list.source}) {`,
        tree: { k: "for", name, list: list.tree },
      })),
    );
  }
  return fc.oneof(...choices);
};

/** The tags of a template as eta's parser hands them to a plugin: text, and tags by type. */
export type EtaNode = string | { t: "i" | "e"; val: string };

/** A whole template of the grammar, and the same template as eta's list of text and tags. */
export interface Template {
  source: string;
  nodes: EtaNode[];
}

/** Text between tags; it never ends in "<", which the next text could turn into a tag. */
const text = fc.string({ maxLength: 8 }).filter((s) => !s.includes("<%") && !s.endsWith("<"));

const join = (parts: Template[]): Template => ({
  source: parts.map((p) => p.source).join(""),
  nodes: parts.flatMap((p) => p.nodes),
});
const tag = (t: "i" | "e", val: string): Template => ({
  source: `<%${t === "i" ? "=" : ""} ${val} %>`,
  nodes: [{ t, val }],
});

/** A template built from the grammar: text, interpolations, if/else chains and loops, nested. */
export const template = (scope: Scope, depth: number): fc.Arbitrary<Template> => {
  const item: Array<fc.Arbitrary<Template>> = [
    text.map((s) => ({ source: s, nodes: s ? [s] : [] })),
    expr(scope, 2, false).map((e) => tag("i", e.source)),
  ];
  if (depth > 0) {
    const body = template(scope, depth - 1);
    item.push(
      fc
        .tuple(cond(scope, 1), body, fc.array(fc.tuple(cond(scope, 1), body), { maxLength: 2 }), fc.option(body))
        .map(([first, then, elseIfs, otherwise]) =>
          join([
            tag("e", `if (${first.source}) {`),
            then,
            ...elseIfs.flatMap(([c, b]) => [tag("e", `} else if (${c.source}) {`), b]),
            ...(otherwise ? [tag("e", "} else {"), otherwise] : []),
            tag("e", "}"),
          ]),
        ),
    );
    const free = LOOP_NAMES.filter((name) => !scope.includes(name));
    if (free.length > 0) {
      item.push(
        fc
          .constantFrom(...free)
          .chain((name) => fc.tuple(fc.constant(name), path(scope), template([...scope, name], depth - 1)))
          .map(([name, list, body]) =>
            join([tag("e", `for (const ${name} of ${list.source}) {`), body, tag("e", "}")]),
          ),
      );
    }
  }
  return fc.array(fc.oneof(...item), { maxLength: 4 }).map(join);
};
