import fc from "fast-check";
import t from "tap";
import { Lexer, type Token, tokenText } from "../../src/template/lex.js";
import { Refusal } from "../../src/template/problems.js";
import { anySource } from "./arbitraries.js";

// The lexer alone: the tokens of one tag, where each is, and that the only thing it throws is
// a Refusal that says where.

type Lexed = { tokens: Token[]; refusal: Refusal | null };

/** Every token from `start` up to the tag's end, or up to the refusal. */
function lex(source: string, start = 0): Lexed {
  const lexer = new Lexer(source, start);
  const tokens: Token[] = [];
  try {
    for (let n = 0; n <= source.length + 1; n++) {
      const token = lexer.next();
      tokens.push(token);
      if (token.k === "end") return { tokens, refusal: null };
    }
    throw new Error(`no end after ${source.length + 1} tokens`);
  } catch (error) {
    if (error instanceof Refusal) return { tokens, refusal: error };
    throw error;
  }
}

const kinds = (source: string) => lex(source).tokens.map((token) => `${token.k}:${tokenText(token)}`);

t.test("a tag's tokens: names, numbers, strings, punctuation, then the end", async (t) => {
  t.same(kinds(' upper(it.a[0]) === "x" && -1.5 <= 2 %>'), [
    "ident:upper",
    "punct:(",
    "ident:it",
    "punct:.",
    "ident:a",
    "punct:[",
    "num:0",
    "punct:]",
    "punct:)",
    "punct:===",
    'str:"x"',
    "punct:&&",
    "num:-1.5",
    "punct:<=",
    "num:2",
    "end:%>",
  ]);
  t.same(kinds("'single' %>"), ['str:"single"', "end:%>"]);
  const { tokens } = lex("it.a -%> rest");
  t.match(tokens.at(-1), { k: "end", at: 5, next: 8 }, "-%> ends the tag");
  t.match(
    lex("it.ab_%>").tokens,
    [{ v: "it" }, { v: "." }, { v: "ab" }, { k: "end", at: 5, next: 8 }],
    "name_%> ends at _",
  );
  t.match(lex("x %> y", 0).tokens.at(-1), { k: "end", next: 4 });
});

t.test("once the end is reached, next() keeps answering the end", async (t) => {
  const lexer = new Lexer("it %> more %>", 0);
  lexer.next();
  const end = lexer.next();
  t.equal(end.k, "end");
  t.equal(lexer.next(), end);
  t.equal(lexer.next(), end);
});

t.test("refusals name the offset, the reason and the token", async (t) => {
  const cases: Array<[string, Partial<Refusal>]> = [
    ["it.name", { at: -1, message: "unclosed tag" }],
    ["  ", { at: -1, message: "unclosed tag" }],
    ["`x` %>", { at: 0, message: "template literals are not allowed", token: "`" }],
    ["a /* %> */", { at: 2, message: "comments are not allowed in tags", token: "/*" }],
    ["a = 1 %>", { at: 2, message: "assignments are not allowed", token: "=" }],
    ["a == 1 %>", { at: 2, message: "use === to compare", token: "==" }],
    ["a != 1 %>", { at: 2, message: "use !== to compare", token: "!=" }],
    ['"a\\u0028" %>', { at: 2, message: "backslashes are not allowed in strings", token: "\\" }],
    ['"open\n" %>', { at: 0, message: "unterminated string" }],
    ["'open %>", { at: 0, message: "unterminated string" }],
    ["0x1f %>", { at: 0, message: "numbers are plain decimals (e.g. 12, -3, 4.5)" }],
    ["1e5 %>", { at: 0 }],
    ["01 %>", { at: 0 }],
    ["1.2.3 %>", { at: 0 }],
    ["a; %>", { at: 1, message: 'unexpected character ";"', token: ";" }],
    ["$ %>", { at: 0, token: "$" }],
  ];
  for (const [source, expected] of cases) {
    const { refusal } = lex(source);
    t.match(refusal, expected, JSON.stringify(source));
  }
});

t.test("property: the lexer throws nothing but a Refusal, and every position is inside the source", async (t) => {
  fc.assert(
    fc.property(
      anySource.chain((source) => fc.tuple(fc.constant(source), fc.nat({ max: source.length }))),
      ([source, start]) => {
        const { tokens, refusal } = lex(source, start);
        let previous = start - 1;
        for (const token of tokens) {
          if (!(token.at > previous && token.at < source.length)) throw new Error(`token at ${token.at}`);
          previous = token.at;
          if (token.k === "end") {
            if (!(token.next >= token.at + 2 && token.next <= source.length)) throw new Error(`end next ${token.next}`);
            if (!source.slice(token.at, token.next).endsWith("%>")) throw new Error("end without %>");
          } else if (token.k === "str") {
            const quote = source[token.at];
            if (source.slice(token.at, token.at + token.v.length + 2) !== `${quote}${token.v}${quote}`) {
              throw new Error(`string at ${token.at}`);
            }
          } else if (!source.startsWith(tokenText(token), token.at)) {
            throw new Error(`${tokenText(token)} is not at ${token.at}`);
          }
        }
        if (refusal && !(refusal.at === -1 || (refusal.at >= start && refusal.at < source.length))) {
          throw new Error(`refusal at ${refusal.at}`);
        }
      },
    ),
    { numRuns: 5000 },
  );
  t.pass("5000 inputs");
});

// Tokens of every kind, written out with whitespace between them, lex back to themselves.
const token = fc.oneof(
  fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,8}$/).map((v) => ({ k: "ident", text: v })),
  fc
    .tuple(fc.boolean(), fc.nat({ max: 1e9 }), fc.option(fc.stringMatching(/^[0-9]{1,5}$/), { nil: undefined }))
    .map(([minus, whole, decimals]) => ({
      k: "num",
      text: `${minus ? "-" : ""}${whole}${decimals === undefined ? "" : `.${decimals}`}`,
    })),
  fc
    .tuple(fc.string({ unit: "grapheme", maxLength: 10 }), fc.constantFrom('"', "'"))
    .filter(([s, quote]) => !s.includes(quote) && !/[\\\n\r]/.test(s))
    .map(([s, quote]) => ({ k: "str", source: `${quote}${s}${quote}`, text: JSON.stringify(s) })),
  fc
    .constantFrom("===", "!==", "&&", "||", "<=", ">=", "<", ">", "!", ".", "[", "]", "(", ")", ",", "{", "}")
    .map((v) => ({ k: "punct", text: v })),
);
const space = fc.constantFrom(" ", "\n", "\t", "  ", " \r\n ");

t.test("property: tokens written with whitespace between them lex back to the same tokens", async (t) => {
  fc.assert(
    fc.property(fc.array(fc.tuple(space, token), { maxLength: 20 }), space, (parts, last) => {
      const source = `${parts.map(([s, tok]) => s + ("source" in tok ? tok.source : tok.text)).join("")}${last}%>`;
      const { tokens, refusal } = lex(source);
      if (refusal) throw new Error(`${refusal.message} in ${JSON.stringify(source)}`);
      const read = tokens.map((tok) => ({ k: tok.k, text: tokenText(tok) }));
      const expected = [...parts.map(([, tok]) => ({ k: tok.k, text: tok.text })), { k: "end", text: "%>" }];
      if (JSON.stringify(read) !== JSON.stringify(expected)) {
        throw new Error(`${JSON.stringify(read)} from ${JSON.stringify(source)}`);
      }
    }),
    { numRuns: 2000 },
  );
  t.pass("2000 tag bodies");
});
