/**
 * The checker: a whole template against the subset, its tags split the way eta splits them,
 * for a caller that wants a verdict and a position rather than an exception (the API answers
 * 422 with it). It never throws.
 */
import { Lexer } from "./lex.js";
import { Blocks, TagParser } from "./parse.js";
import { Refusal, type TemplateProblem } from "./problems.js";

export type TemplateCheck = { ok: true } | { ok: false; problem: TemplateProblem };

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
