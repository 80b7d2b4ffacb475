/**
 * The template language: a logic-less subset of eta. A template body is checked against it
 * when it is written (checkTemplate), and the eta engine that renders it
 * (templateEngineOptions) checks it again and never runs what the author wrote: an eta plugin
 * replaces the JavaScript of every tag with code generated from the parsed tree. Allowed, and
 * nothing else:
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
 *
 * Modules by job: lex (tokens of one tag), parse (a tag's tree and the blocks across tags),
 * check (a whole template's verdict with a position), compile (the eta settings and the code
 * generated for each tag), runtime (what that code calls), filters, problems (the error
 * types); params and variants hold the rules for a template's data and its stored variants.
 */
export { checkTemplate } from "./check.js";
export { templateEngineOptions } from "./compile.js";
export { missingParams, PARAM_NAME } from "./params.js";
export { formatTemplateProblem, type TemplateProblem, TemplateRenderError, TemplateSyntaxError } from "./problems.js";
export {
  isHtmlBody,
  MAX_BODY_TEMPLATE_LENGTH,
  MAX_SUBJECT_LENGTH,
  subjectProblem,
  TEMPLATE_ID_PATTERN,
} from "./variants.js";
