/**
 * The lexer: the inside of one tag, up to eta's closing `%>` (with its `-`/`_` marker), as
 * tokens. It refuses, with a Refusal at the offending offset, whatever no tag of the subset
 * can hold: backslashes, template literals, comments, assignments, `==`, other characters.
 */
import { Refusal } from "./problems.js";

export type Token =
  | { k: "ident"; v: string; at: number }
  | { k: "num"; v: number; text: string; at: number }
  | { k: "str"; v: string; at: number }
  | { k: "punct"; v: string; at: number }
  | { k: "end"; at: number; next: number };

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
export const isForbiddenName = (name: string) => FORBIDDEN_NAMES.has(name) || name.startsWith("__");
/** After a ".", data keys such as `it.order.return` are fine; these never are. */
export const isForbiddenProperty = (name: string) =>
  name === "constructor" || name === "prototype" || name.startsWith("__");

/** Eta ends a tag at `\s*(-|_)?%>`: the first such place outside a string literal. */
function closeAt(source: string, i: number): number {
  if (source.startsWith("%>", i)) return i + 2;
  if ((source[i] === "-" || source[i] === "_") && source.startsWith("%>", i + 1)) return i + 3;
  return -1;
}

/** The tokens of one tag, one at a time, so a refusal names the first problem in reading order. */
export class Lexer {
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

/** A token as the author wrote it, for a problem to quote. */
export const tokenText = (token: Token): string => {
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
