/**
 * The template language: a logic-less subset of eta. A template body is checked against it
 * when it is written, and the eta engine that renders it (templateEngineOptions) checks it
 * again and never runs what the author wrote: an eta plugin replaces the JavaScript of every
 * tag with code generated from this parser's tree. Allowed, and nothing else:
 *
 *   <%= PATH %>  <%= filter(PATH, literal…) %>       escaped (HTML bodies) interpolation
 *   <% if (COND) { %> <% } else if (COND) { %> <% } else { %> <% } %>
 *   <% for (const item of PATH) { %> … <% } %>     loops over a data array
 *
 * PATH is `it` or a loop variable followed by `.name` and `[0]` steps (never `constructor`,
 * `prototype` or a name starting with `__`); it reads the data's own properties only.
 * COND joins PATHs, filter calls and literals with `!`, `===`, `!==`, `<`, `>`, `<=`, `>=`,
 * `&&`, `||` and parentheses. Literals are strings without backslashes, numbers, true, false,
 * null. Eta's whitespace markers (`<%-`, `<%_`, `-%>`, `_%>`) are allowed; raw output `<%~ %>`
 * is not. Loops only walk arrays of the data, so every render ends; a render also stops past
 * TEMPLATE_RENDER_LIMITS (a TemplateRenderError), which the renderer reports as a failure.
 */

/** The filters a template may call, with the literals each takes after its value. */
export const TEMPLATE_FILTERS = {
  upper: { min: 0, max: 0, args: [] },
  lower: { min: 0, max: 0, args: [] },
  trim: { min: 0, max: 0, args: [] },
  /** fallback(value, "literal"): the literal when value is missing, null or "". */
  fallback: { min: 1, max: 1, args: ["any"] },
  /** number(value, digits?): a number with a fixed count of decimals (0-10). */
  number: { min: 0, max: 1, args: ["digits"] },
  /** date(value, "date" | "datetime" | "iso"): an ISO 8601 string or epoch ms, in UTC. */
  date: { min: 0, max: 1, args: ["date-style"] },
  /** join(array, separator?): the items as text, ", " between them by default. */
  join: { min: 0, max: 1, args: ["string"] },
} as const satisfies Record<string, { min: number; max: number; args: readonly string[] }>;
export type TemplateFilterName = keyof typeof TEMPLATE_FILTERS;
const isFilterName = (name: string): name is TemplateFilterName => Object.hasOwn(TEMPLATE_FILTERS, name);
const DATE_STYLES = ["date", "datetime", "iso"];

/** What one render may do: loop iterations in all, and characters of output. */
export const TEMPLATE_RENDER_LIMITS = { iterations: 100_000, outputChars: 1_048_576 };
const MAX_BLOCK_DEPTH = 32;
const MAX_EXPRESSION_DEPTH = 16;

/** Where a template leaves the subset: 1-based line and column (UTF-16 units), and the token. */
export interface TemplateProblem {
  message: string;
  line: number;
  column: number;
  offset: number;
  token: string;
}

export class TemplateSyntaxError extends Error {
  readonly problem: TemplateProblem;
  constructor(problem: TemplateProblem) {
    super(formatTemplateProblem(problem));
    this.name = "TemplateSyntaxError";
    this.problem = problem;
  }
}

/** A render that broke a limit or read through a missing value: a failure, never a crash. */
export class TemplateRenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TemplateRenderError";
  }
}

export const formatTemplateProblem = (p: TemplateProblem) =>
  `line ${p.line}, column ${p.column}: ${p.message}${p.token ? ` (at ${JSON.stringify(p.token.slice(0, 40))})` : ""}`;

export type TemplateCheck = { ok: true } | { ok: false; problem: TemplateProblem };

// ---------------------------------------------------------------------------------------------
// Lexer: the inside of one tag, up to eta's closing `%>` (with its `-`/`_` marker).

type Token =
  | { k: "ident"; v: string; at: number }
  | { k: "num"; v: number; text: string; at: number }
  | { k: "str"; v: string; at: number }
  | { k: "punct"; v: string; at: number }
  | { k: "end"; at: number; next: number };

class Refusal {
  constructor(
    readonly at: number,
    readonly message: string,
    readonly token: string,
  ) {}
}

const PUNCTS = ["===", "!==", "&&", "||", "<=", ">=", "<", ">", "!", ".", "[", "]", "(", ")", ",", "{", "}"];
const WHITESPACE = /\s/;
const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;
const DIGIT = /[0-9]/;

/** Names that are refused with their own word: they are how templates reach outside the data. */
const FORBIDDEN_NAMES = new Set([
  "constructor",
  "prototype",
  "process",
  "require",
  "module",
  "exports",
  "global",
  "globalThis",
  "window",
  "self",
  "this",
  "import",
  "eval",
  "Function",
  "Object",
  "Reflect",
  "Proxy",
  "new",
  "function",
  "class",
  "while",
  "do",
  "with",
  "return",
  "var",
  "let",
  "delete",
  "typeof",
  "void",
  "yield",
  "await",
  "async",
  "throw",
  "try",
  "catch",
  "debugger",
  "arguments",
  "include",
  "includeAsync",
  "layout",
  "output",
  "capture",
  "block",
  "options",
]);
const isForbiddenName = (name: string) => FORBIDDEN_NAMES.has(name) || name.startsWith("__");
/** After a ".", data keys such as `it.order.return` are fine; these never are. */
const isForbiddenProperty = (name: string) => name === "constructor" || name === "prototype" || name.startsWith("__");

/** Eta ends a tag at `\s*(-|_)?%>`: the first such place outside a string literal. */
function closeAt(source: string, i: number): number {
  if (source.startsWith("%>", i)) return i + 2;
  if ((source[i] === "-" || source[i] === "_") && source.startsWith("%>", i + 1)) return i + 3;
  return -1;
}

/** The tokens of one tag, one at a time, so a refusal names the first problem in reading order. */
class Lexer {
  private i: number;
  private last: Token | null = null;
  constructor(
    private readonly source: string,
    start: number,
  ) {
    this.i = start;
  }

  /** The next token; once the tag's end is reached, the end again. */
  next(): Token {
    if (this.last?.k === "end") return this.last;
    this.last = this.read();
    return this.last;
  }

  private read(): Token {
    const source = this.source;
    let i = this.i;
    const token = (t: Token, to: number): Token => {
      this.i = to;
      return t;
    };
    while (i < source.length && WHITESPACE.test(source[i] as string)) i++;
    this.i = i;
    if (i >= source.length) throw new Refusal(-1, "unclosed tag", "");
    const close = closeAt(source, i);
    if (close >= 0) {
      return token({ k: "end", at: i, next: close }, close);
    }
    const c = source[i] as string;
    if (IDENT_START.test(c)) {
      let j = i + 1;
      // `name_%>` ends the tag at `_`, as eta reads it.
      while (j < source.length && IDENT_PART.test(source[j] as string) && closeAt(source, j) < 0) j++;
      return token({ k: "ident", v: source.slice(i, j), at: i }, j);
    }
    if (DIGIT.test(c) || (c === "-" && DIGIT.test(source[i + 1] ?? ""))) {
      const match = /^-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,15})?/.exec(source.slice(i, i + 40));
      const text = match?.[0] ?? c;
      const after = source[i + text.length] ?? "";
      if (!match || /[A-Za-z0-9_$.]/.test(after)) {
        throw new Refusal(i, "numbers are plain decimals (e.g. 12, -3, 4.5)", source.slice(i, i + 12));
      }
      return token({ k: "num", v: Number(text), text, at: i }, i + text.length);
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < source.length && source[j] !== c) {
        const d = source[j];
        if (d === "\\") throw new Refusal(j, "backslashes are not allowed in strings", "\\");
        if (d === "\n" || d === "\r") throw new Refusal(i, "unterminated string", c);
        j++;
      }
      if (j >= source.length) throw new Refusal(i, "unterminated string", c);
      return token({ k: "str", v: source.slice(i + 1, j), at: i }, j + 1);
    }
    if (c === "`") throw new Refusal(i, "template literals are not allowed", c);
    if (c === "/" && (source[i + 1] === "*" || source[i + 1] === "/")) {
      throw new Refusal(i, "comments are not allowed in tags", source.slice(i, i + 2));
    }
    if ((c === "=" && !source.startsWith("===", i)) || (c === "!" && source[i + 1] === "=" && source[i + 2] !== "=")) {
      const op = source.startsWith("==", i) || source.startsWith("!=", i) ? source.slice(i, i + 2) : "=";
      throw new Refusal(
        i,
        op === "=" ? "assignments are not allowed" : `use ${op === "==" ? "===" : "!=="} to compare`,
        op,
      );
    }
    const punct = PUNCTS.find((p) => source.startsWith(p, i));
    if (!punct) throw new Refusal(i, `unexpected character ${JSON.stringify(c)}`, c);
    return token({ k: "punct", v: punct, at: i }, i + punct.length);
  }
}

// ---------------------------------------------------------------------------------------------
// Parser: one tag's tokens to a small tree; the block structure across tags.

type Literal = string | number | boolean | null;
type Expr =
  | { k: "path"; root: number; steps: Array<string | number>; label: string }
  | { k: "call"; name: TemplateFilterName; arg: Expr; extra: Literal[] }
  | { k: "lit"; value: Literal };
type Cond =
  | { k: "or" | "and"; items: Cond[] }
  | { k: "not"; cond: Cond }
  | { k: "cmp"; op: string; a: Expr; b: Expr }
  | { k: "value"; expr: Expr };

type Statement =
  | { k: "out"; expr: Expr }
  | { k: "if"; cond: Cond }
  | { k: "elseif"; cond: Cond }
  | { k: "else" }
  | { k: "close" }
  | { k: "for"; name: string; list: Expr }
  | { k: "empty" };

/** The loop variables in scope, innermost last; a path's root is `it` (-1) or an index here. */
type Scope = string[];

const COMPARISONS = new Set(["===", "!==", "<", ">", "<=", ">="]);

class TagParser {
  private current: Token;
  constructor(
    private readonly lexer: Lexer,
    private readonly scope: Scope,
  ) {
    this.current = lexer.next();
    this.start = this.current.at;
  }
  /** Where the tag's first token is. */
  readonly start: number;

  private peek(): Token {
    return this.current;
  }
  private next(): Token {
    const token = this.current;
    this.current = this.lexer.next();
    return token;
  }
  private is(value: string): boolean {
    const token = this.current;
    return (token.k === "punct" || token.k === "ident") && token.v === value;
  }
  /** The tag's end, once a whole tag was parsed. */
  get endToken(): Token & { k: "end" } {
    const token = this.current;
    if (token.k !== "end") this.fail(token, "expected the end of the tag");
    return token;
  }
  private fail(token: Token, message: string): never {
    throw new Refusal(token.at, message, tokenText(token));
  }
  private expect(value: string, what = `expected "${value}"`): void {
    const token = this.next();
    if ((token.k === "punct" || token.k === "ident") && token.v === value) return;
    this.fail(token, what);
  }
  private end(): void {
    const token = this.peek();
    if (token.k !== "end") this.fail(token, "expected the end of the tag");
  }

  interpolation(): Expr {
    if (this.peek().k === "end") this.fail(this.peek(), "an interpolation needs a value");
    const expr = this.expr(0, false);
    this.end();
    return expr;
  }

  statement(): Statement {
    const first = this.peek();
    if (first.k === "end") return { k: "empty" };
    if (this.is("if")) {
      this.next();
      const cond = this.parenCond();
      this.expect("{", 'expected "{" after the condition');
      this.end();
      return { k: "if", cond };
    }
    if (this.is("for")) {
      this.next();
      this.expect("(", 'expected "(" after for');
      this.expect("const", "loops are written for (const item of it.list)");
      const name = this.next();
      if (name.k !== "ident") this.fail(name, "expected a loop variable name");
      if (isForbiddenName(name.v) || name.v === "it" || isFilterName(name.v) || RESERVED.has(name.v)) {
        this.fail(name, `"${name.v}" cannot name a loop variable`);
      }
      if (this.scope.includes(name.v)) this.fail(name, `"${name.v}" is already a loop variable here`);
      this.expect("of", "loops are written for (const item of it.list)");
      const list = this.path(this.next());
      this.expect(")", 'expected ")" after the list');
      this.expect("{", 'expected "{" after the loop');
      this.end();
      return { k: "for", name: name.v, list };
    }
    if (this.is("}")) {
      this.next();
      if (this.peek().k === "end") return { k: "close" };
      this.expect("else", 'expected "else" or the end of the tag after "}"');
      if (this.is("if")) {
        this.next();
        const cond = this.parenCond();
        this.expect("{", 'expected "{" after the condition');
        this.end();
        return { k: "elseif", cond };
      }
      this.expect("{", 'expected "{" or "if" after else');
      this.end();
      return { k: "else" };
    }
    if (first.k === "ident" && isForbiddenName(first.v)) this.fail(first, `"${first.v}" is not allowed`);
    this.fail(
      first,
      "a <% %> tag holds only if (…) {, } else if (…) {, } else {, for (const x of …) { or }; print values with <%= %>",
    );
  }

  private parenCond(): Cond {
    this.expect("(", 'expected "(" after if');
    const cond = this.cond(0);
    this.expect(")", 'expected ")" to close the condition');
    return cond;
  }

  private cond(depth: number): Cond {
    if (depth > MAX_EXPRESSION_DEPTH) this.fail(this.peek(), "the condition nests too deeply");
    const items = [this.conjunction(depth)];
    while (this.is("||")) {
      this.next();
      items.push(this.conjunction(depth));
    }
    return items.length === 1 ? (items[0] as Cond) : { k: "or", items };
  }

  private conjunction(depth: number): Cond {
    const items = [this.unary(depth)];
    while (this.is("&&")) {
      this.next();
      items.push(this.unary(depth));
    }
    return items.length === 1 ? (items[0] as Cond) : { k: "and", items };
  }

  private unary(depth: number): Cond {
    if (depth > MAX_EXPRESSION_DEPTH) this.fail(this.peek(), "the condition nests too deeply");
    if (this.is("!")) {
      this.next();
      return { k: "not", cond: this.unary(depth + 1) };
    }
    if (this.is("(")) {
      this.next();
      const inner = this.cond(depth + 1);
      this.expect(")", 'expected ")"');
      return inner;
    }
    const a = this.expr(depth, true);
    const op = this.peek();
    if (op.k === "punct" && COMPARISONS.has(op.v)) {
      this.next();
      return { k: "cmp", op: op.v, a, b: this.expr(depth, true) };
    }
    return { k: "value", expr: a };
  }

  private literal(token: Token): Literal | undefined {
    if (token.k === "str" || token.k === "num") return token.v;
    if (token.k === "ident" && token.v === "true") return true;
    if (token.k === "ident" && token.v === "false") return false;
    if (token.k === "ident" && token.v === "null") return null;
    return undefined;
  }

  private expr(depth: number, literals: boolean): Expr {
    if (depth > MAX_EXPRESSION_DEPTH) this.fail(this.peek(), "the expression nests too deeply");
    const token = this.next();
    const literal = this.literal(token);
    if (literal !== undefined) {
      if (!literals) this.fail(token, "print data: a path such as it.name, or a filter of one");
      return { k: "lit", value: literal };
    }
    if (token.k === "ident" && this.is("(")) {
      if (!isFilterName(token.v)) {
        if (isForbiddenName(token.v)) this.fail(token, `"${token.v}" is not allowed`);
        this.fail(token, `"${token.v}" is not a filter (filters: ${Object.keys(TEMPLATE_FILTERS).join(", ")})`);
      }
      const spec = TEMPLATE_FILTERS[token.v];
      this.next();
      const arg = this.expr(depth + 1, false);
      const extra: Literal[] = [];
      while (this.is(",")) {
        this.next();
        const at = this.next();
        const value = this.literal(at);
        if (value === undefined) this.fail(at, `the arguments of ${token.v} after the value are literals`);
        const kind = spec.args[extra.length];
        if (kind === undefined) this.fail(at, `${token.v} takes at most ${spec.max} argument(s) after the value`);
        if (kind === "digits" && !(typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= 10)) {
          this.fail(at, `${token.v} takes a count of decimals from 0 to 10`);
        }
        if (kind === "string" && typeof value !== "string") this.fail(at, `${token.v} takes a string`);
        if (kind === "date-style" && !(typeof value === "string" && DATE_STYLES.includes(value))) {
          this.fail(at, `${token.v} takes one of ${DATE_STYLES.map((s) => `"${s}"`).join(", ")}`);
        }
        extra.push(value);
      }
      if (extra.length < spec.min) this.fail(this.peek(), `${token.v} needs ${spec.min} argument(s) after the value`);
      this.expect(")", `expected ")" to close ${token.v}(…)`);
      return { k: "call", name: token.v, arg, extra };
    }
    return this.path(token);
  }

  private path(token: Token): Expr {
    if (token.k !== "ident") this.fail(token, "expected a data path such as it.name");
    if (isForbiddenName(token.v)) this.fail(token, `"${token.v}" is not allowed`);
    const root = token.v === "it" ? -1 : this.scope.lastIndexOf(token.v);
    if (root === -1 && token.v !== "it") {
      this.fail(token, `unknown name "${token.v}": paths start at it or a loop variable`);
    }
    const steps: Array<string | number> = [];
    let label = token.v;
    for (;;) {
      if (this.is(".")) {
        this.next();
        const name = this.next();
        if (name.k !== "ident") this.fail(name, 'expected a property name after "."');
        if (isForbiddenProperty(name.v)) this.fail(name, `"${name.v}" is not allowed`);
        steps.push(name.v);
        label += `.${name.v}`;
      } else if (this.is("[")) {
        this.next();
        const index = this.next();
        if (index.k !== "num" || !Number.isInteger(index.v) || index.v < 0) {
          this.fail(index, "only whole-number indexes such as [0] are allowed");
        }
        this.expect("]", 'expected "]"');
        steps.push(index.v);
        label += `[${index.v}]`;
      } else break;
      if (steps.length > 32) this.fail(this.peek(), "the path is too long");
    }
    if (this.is("(")) this.fail(this.peek(), "calling functions is not allowed (filters are upper(it.x), …)");
    return { k: "path", root, steps, label };
  }
}

const RESERVED = new Set(["if", "else", "for", "of", "in", "const", "true", "false", "null", "undefined", "NaN"]);

const tokenText = (token: Token): string => {
  switch (token.k) {
    case "ident":
    case "punct":
      return token.v;
    case "num":
      return token.text;
    case "str":
      return JSON.stringify(token.v);
    case "end":
      return "%>";
  }
};

/** Open blocks across tags: `if` and `for`, each closed by `<% } %>`. */
class Blocks {
  private readonly open: Array<{ kind: "if" | "for"; elsed: boolean; at: number; name?: string }> = [];
  get scope(): Scope {
    return this.open.flatMap((b) => (b.kind === "for" && b.name ? [b.name] : []));
  }
  get loopDepth(): number {
    return this.scope.length;
  }
  apply(statement: Statement, at: number): void {
    const top = this.open[this.open.length - 1];
    switch (statement.k) {
      case "if":
      case "for":
        if (this.open.length >= MAX_BLOCK_DEPTH) throw new Refusal(at, "blocks nest too deeply", "{");
        this.open.push({
          kind: statement.k,
          elsed: false,
          at,
          ...(statement.k === "for" ? { name: statement.name } : {}),
        });
        return;
      case "elseif":
      case "else":
        if (top?.kind !== "if") throw new Refusal(at, "else without an open if", "}");
        if (top.elsed) throw new Refusal(at, "else after the else of this if", "}");
        if (statement.k === "else") top.elsed = true;
        return;
      case "close":
        if (!top) throw new Refusal(at, "} closes no open if or for", "}");
        this.open.pop();
        return;
      case "empty":
        return;
    }
  }
  finish(): void {
    const top = this.open[this.open.length - 1];
    if (top) throw new Refusal(top.at, `this ${top.kind} is never closed with <% } %>`, top.kind);
  }
}

// ---------------------------------------------------------------------------------------------
// The checker: eta's tag syntax, the same way eta splits it.

/** Eta opens a tag at `<%`, then `-`/`_`, spaces, the `=` or `~` prefix and spaces. */
const OPEN = /<%(-|_)?\s*(=|~)?\s*/g;

const position = (source: string, offset: number) => {
  const before = source.slice(0, offset);
  const line = before.split("\n").length;
  return { line, column: offset - (before.lastIndexOf("\n") + 1) + 1 };
};

/** Checks a template against the subset; the problem names the first place it leaves it. */
export function checkTemplate(source: string): TemplateCheck {
  const blocks = new Blocks();
  OPEN.lastIndex = 0;
  let from = 0;
  try {
    for (;;) {
      OPEN.lastIndex = from;
      const open = OPEN.exec(source);
      if (!open) break;
      const prefix = open[2] ?? "";
      const contentStart = open.index + open[0].length;
      if (prefix === "~") throw new Refusal(open.index, "raw output <%~ %> is not allowed: use <%= %>", open[0].trim());
      try {
        const parser = new TagParser(new Lexer(source, contentStart), blocks.scope);
        if (prefix === "=") parser.interpolation();
        else blocks.apply(parser.statement(), parser.start);
        from = parser.endToken.next;
      } catch (error) {
        if (error instanceof Refusal && error.at < 0) throw new Refusal(open.index, "unclosed tag", open[0].trim());
        throw error;
      }
    }
    blocks.finish();
    return { ok: true };
  } catch (error) {
    if (!(error instanceof Refusal)) throw error;
    return {
      ok: false,
      problem: { ...position(source, error.at), offset: error.at, message: error.message, token: error.token },
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Code generation: what eta compiles in place of each tag's text.

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

type EtaAstNode = string | { t: string; val: string };

/**
 * Replaces the text of every tag eta parsed with code generated from this grammar's tree, so
 * what runs is only ever data reads, the filters, comparisons and loops over data arrays.
 * Anything outside the grammar (however eta split it) throws a TemplateSyntaxError.
 */
function generateAst<T extends EtaAstNode>(ast: T[]): T[] {
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

// ---------------------------------------------------------------------------------------------
// Runtime: what the generated code calls, fresh for every render.

const isMissing = (value: unknown) => value === undefined || value === null;

/** A value as output text: strings as they are, numbers and booleans printed, nothing for none. */
function text(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    case "object":
      if (value === null) return "";
      try {
        return JSON.stringify(value) ?? "";
      } catch {
        return "";
      }
    default:
      return "";
  }
}

const pad = (n: number) => String(n).padStart(2, "0");

const filters = {
  upper: (value: unknown) => text(value).toUpperCase(),
  lower: (value: unknown) => text(value).toLowerCase(),
  trim: (value: unknown) => text(value).trim(),
  fallback: (value: unknown, otherwise: unknown) => (isMissing(value) || value === "" ? otherwise : value),
  number: (value: unknown, digits?: number) => {
    const n =
      typeof value === "number" ? value : typeof value === "string" && value.trim() ? Number(value) : Number.NaN;
    if (!Number.isFinite(n)) return text(value);
    return digits === undefined ? String(n) : n.toFixed(digits);
  },
  date: (value: unknown, style = "date") => {
    const date = typeof value === "string" || typeof value === "number" ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) return text(value);
    if (style === "iso") return date.toISOString();
    const day = `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`;
    return style === "datetime" ? `${day} ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())} UTC` : day;
  },
  join: (value: unknown, separator = ", ") => (Array.isArray(value) ? value.map(text).join(separator) : text(value)),
} satisfies Record<TemplateFilterName, (value: unknown, ...extra: never[]) => unknown>;

function createRuntime() {
  let iterations = 0;
  let printed = 0;
  return {
    f: filters,
    /** Own properties only (and the length of arrays and strings): nothing inherited is reachable. */
    get(base: unknown, steps: Array<string | number>, label: string): unknown {
      let value = base;
      for (let i = 0; i < steps.length; i++) {
        const step = steps[i] as string | number;
        if (isMissing(value)) {
          throw new TemplateRenderError(`${label}: a value before "${step}" is ${value === null ? "null" : "missing"}`);
        }
        if (step === "length" && (typeof value === "string" || Array.isArray(value))) value = value.length;
        else if (typeof value === "object" && Object.hasOwn(value as object, step)) {
          value = (value as Record<string | number, unknown>)[step];
        } else value = undefined;
      }
      return value;
    },
    out(value: unknown): string {
      const s = text(value);
      printed += s.length;
      if (printed > TEMPLATE_RENDER_LIMITS.outputChars) {
        throw new TemplateRenderError(`the output passes ${TEMPLATE_RENDER_LIMITS.outputChars} characters`);
      }
      return s;
    },
    each(value: unknown): readonly unknown[] {
      if (!Array.isArray(value)) return [];
      iterations += value.length;
      if (iterations > TEMPLATE_RENDER_LIMITS.iterations) {
        throw new TemplateRenderError(`loops pass ${TEMPLATE_RENDER_LIMITS.iterations} iterations`);
      }
      return value;
    },
    step(length: number): void {
      if (length > TEMPLATE_RENDER_LIMITS.outputChars) {
        throw new TemplateRenderError(`the output passes ${TEMPLATE_RENDER_LIMITS.outputChars} characters`);
      }
    },
    cmp(op: string, a: unknown, b: unknown): boolean {
      const comparable =
        (typeof a === "number" && typeof b === "number") || (typeof a === "string" && typeof b === "string");
      if (!comparable) return false;
      const x = a as number | string;
      const y = b as number | string;
      return op === "<" ? x < y : op === ">" ? x > y : op === "<=" ? x <= y : x >= y;
    },
  };
}
export type TemplateRuntime = ReturnType<typeof createRuntime>;

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
