/**
 * How the template language reports a problem: a TemplateProblem with a position when a
 * template leaves the subset, a TemplateRenderError when a render breaks a limit.
 */

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

/**
 * Where one tag leaves the subset, as an offset into the source (-1: the source ends inside
 * the tag). The lexer and parser throw it; the checker turns it into a TemplateProblem and
 * code generation into a TemplateSyntaxError, so it never leaves the template modules.
 */
export class Refusal {
  constructor(
    readonly at: number,
    readonly message: string,
    readonly token: string,
  ) {}
}
