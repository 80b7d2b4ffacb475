/**
 * The parser: one tag's tokens to a small tree (an interpolation's expression, or a block
 * statement with its condition), and the block structure across tags. Every name a path may
 * start from is `it` or a loop variable in scope, so the tree only ever reads the data.
 */
import { DATE_STYLES, isFilterName, TEMPLATE_FILTERS, type TemplateFilterName } from "./filters.js";
import { isForbiddenName, isForbiddenProperty, type Lexer, type Token, tokenText } from "./lex.js";
import { Refusal } from "./problems.js";

const MAX_BLOCK_DEPTH = 32;
const MAX_EXPRESSION_DEPTH = 16;

export type Literal = string | number | boolean | null;
export type Expr =
  | { k: "path"; root: number; steps: Array<string | number>; label: string }
  | { k: "call"; name: TemplateFilterName; arg: Expr; extra: Literal[] }
  | { k: "lit"; value: Literal };
export type Cond =
  | { k: "or" | "and"; items: Cond[] }
  | { k: "not"; cond: Cond }
  | { k: "cmp"; op: string; a: Expr; b: Expr }
  | { k: "value"; expr: Expr };

export type Statement =
  | { k: "out"; expr: Expr }
  | { k: "if"; cond: Cond }
  | { k: "elseif"; cond: Cond }
  | { k: "else" }
  | { k: "close" }
  | { k: "for"; name: string; list: Expr }
  | { k: "empty" };

/** The loop variables in scope, innermost last; a path's root is `it` (-1) or an index here. */
export type Scope = string[];

const COMPARISONS = new Set(["===", "!==", "<", ">", "<=", ">="]);

/**
 * Reads one tag: interpolation() for `<%= %>`, statement() for `<% %>`. The first problem, in
 * reading order, is thrown as a Refusal at its token.
 */
export class TagParser {
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

/** Open blocks across tags: `if` and `for`, each closed by `<% } %>`. */
export class Blocks {
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
