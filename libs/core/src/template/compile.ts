/**
 * Code generation: what eta compiles in place of each tag's text. Eta still splits a template
 * into text and tags, but the JavaScript it compiles for every tag is generated here from the
 * parsed tree, never taken from the author: a path becomes a runtime read, a filter a call
 * into the runtime's filter table, a literal its JSON. A template outside the subset does not
 * compile at all: the source is checked first and every tag is parsed again.
 */
import { checkTemplate } from "./check.js";
import { Lexer } from "./lex.js";
import { Blocks, type Cond, type Expr, type Literal, type Statement, TagParser } from "./parse.js";
import { Refusal, TemplateSyntaxError } from "./problems.js";
import { createRuntime } from "./runtime.js";

const js = (value: Literal) => (value === null ? "null" : JSON.stringify(value));

function exprCode(expr: Expr): string {
  switch (expr.k) {
    case "lit":
      return js(expr.value);
    case "path": {
      const root = expr.root < 0 ? "it" : `__v${expr.root}`;
      if (expr.steps.length === 0) return root;
      return `__n.get(${root},${JSON.stringify(expr.steps)},${JSON.stringify(expr.label)})`;
    }
    case "call":
      return `__n.f.${expr.name}(${[exprCode(expr.arg), ...expr.extra.map(js)].join(",")})`;
  }
}

function condCode(cond: Cond): string {
  switch (cond.k) {
    case "or":
      return `(${cond.items.map(condCode).join("||")})`;
    case "and":
      return `(${cond.items.map(condCode).join("&&")})`;
    case "not":
      return `!${condCode(cond.cond)}`;
    case "value":
      return `(${exprCode(cond.expr)})`;
    case "cmp":
      return cond.op === "===" || cond.op === "!=="
        ? `(${exprCode(cond.a)}${cond.op}${exprCode(cond.b)})`
        : `__n.cmp(${JSON.stringify(cond.op)},${exprCode(cond.a)},${exprCode(cond.b)})`;
  }
}

function statementCode(statement: Statement, loopDepth: number): string {
  switch (statement.k) {
    case "if":
      return `if (${condCode(statement.cond)}) {`;
    case "elseif":
      return `} else if (${condCode(statement.cond)}) {`;
    case "else":
      return "} else {";
    case "close":
      return "}";
    case "for":
      return `for (const __v${loopDepth} of __n.each(${exprCode(statement.list)})) { __n.step(__eta.res.length);`;
    case "empty":
      return "";
  }
  throw new Error("unknown statement");
}

export type EtaAstNode = string | { t: string; val: string };

/**
 * Replaces the text of every tag eta parsed with code generated from this grammar's tree, so
 * what runs is only ever data reads, the filters, comparisons and loops over data arrays.
 * Anything outside the grammar (however eta split it) throws a TemplateSyntaxError.
 */
export function generateAst<T extends EtaAstNode>(ast: T[]): T[] {
  const blocks = new Blocks();
  const out = ast.map((item): T => {
    if (typeof item === "string") return item;
    const node = item as { t: string; val: string };
    const fail = (error: unknown): never => {
      const refusal = error instanceof Refusal ? error : null;
      throw new TemplateSyntaxError({
        message: `tag "${node.val.slice(0, 60)}": ${refusal ? refusal.message : String(error)}`,
        line: 0,
        column: 0,
        offset: 0,
        token: refusal?.token ?? "",
      });
    };
    try {
      if (node.t !== "i" && node.t !== "e") throw new Refusal(0, "only <%= %> and <% %> tags are allowed", node.t);
      const parser = new TagParser(new Lexer(`${node.val} %>`, 0), blocks.scope);
      const ends = () => {
        if (parser.endToken.at !== node.val.length + 1) throw new Refusal(0, "the tag ends before eta ends it", "%>");
      };
      if (node.t === "i") {
        const expr = parser.interpolation();
        ends();
        return { ...node, val: `__n.out(${exprCode(expr)})` } as T;
      }
      const statement = parser.statement();
      ends();
      const depth = blocks.loopDepth;
      blocks.apply(statement, 0);
      return { ...node, val: statementCode(statement, depth) } as T;
    } catch (error) {
      return fail(error);
    }
  });
  try {
    blocks.finish();
  } catch (error) {
    throw new TemplateSyntaxError({
      message: error instanceof Refusal ? error.message : String(error),
      line: 0,
      column: 0,
      offset: 0,
      token: "",
    });
  }
  return out;
}

/**
 * The eta plugin and settings that hold a template to the subset: the source is checked
 * (a TemplateSyntaxError naming the position) and every tag compiles from the parsed tree.
 */
export const safeTemplateSettings = () => ({
  functionHeader: "const __n = this.config.notifyTemplateRuntime();",
  notifyTemplateRuntime: createRuntime,
  plugins: [
    {
      processTemplate: (source: string) => {
        const check = checkTemplate(source);
        if (!check.ok) throw new TemplateSyntaxError(check.problem);
        return source;
      },
      processAST: generateAst,
    },
  ],
});

/**
 * Eta settings shared by the check when a template is written and the renderer, so a template
 * that passed the check compiles the same way when it renders. Data is `it`, never `with`
 * scope; email bodies are HTML and escape what they interpolate, the other channels (and every
 * subject) are plain text and do not. The safe settings hold every template to the logic-less
 * subset: compiling anything else throws a TemplateSyntaxError, and what compiles is generated
 * from the parsed tags, never the author's JavaScript.
 */
export const templateEngineOptions = (html: boolean) => ({
  autoEscape: html,
  autoTrim: false as const,
  useWith: false,
  varName: "it",
  ...safeTemplateSettings(),
});
