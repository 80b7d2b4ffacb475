import fc from "fast-check";
import t from "tap";
import { checkTemplate } from "../../src/template/check.js";
import { formatTemplateProblem, type TemplateProblem } from "../../src/template/problems.js";
import { anySource, template } from "./arbitraries.js";

// The template checker alone (rendering is tested in apps/processor/test/template-escape.test.ts):
// what it refuses, where it says the problem is, and that no input makes it crash.

const refused = (source: string): TemplateProblem => {
  const check = checkTemplate(source);
  if (check.ok) throw new Error(`accepted: ${source}`);
  return check.problem;
};

/** Every template the repository ships or documents (seeds, docs, tests). */
const shipped = [
  "Welcome, <%= it.name %>!",
  "<h1>Hello <%= it.name %></h1><p>Thanks for joining.</p>",
  "Hello <%= it.name %>, thanks for joining.",
  "Order <%= it.order.id %> for <%= it.name %>",
  "<p>Commande <%= it.order.id %></p>",
  "Hello <%= it.name %> of <%= it.city %>",
  "<%= it.missing.deep %>",
  "<%= it.name %>: <%= it.total %>",
  "revision 3",
  "x",
];

t.test("the templates the repository ships and documents are accepted", async (t) => {
  for (const source of shipped) t.same(checkTemplate(source), { ok: true }, source);
});

t.test("the subset: paths, filters, conditions, loops, whitespace markers", async (t) => {
  const accepted = [
    "<%= it.a.b[0].c %>",
    "<%=it.name%>",
    "<%-= it.name -%>\n",
    "<%_= it.name _%>",
    "<%= it.ab_%>",
    "<%= it.a-%>",
    "<%= upper(trim(it.name)) %>",
    '<%= fallback(it.nick, "friend") %> <%= fallback(it.n, 0) %>',
    '<%= number(it.total, 2) %> <%= date(it.at) %> <%= date(it.at, "datetime") %> <%= join(it.tags, " / ") %>',
    '<%= fallback(it.x, "%>") %>',
    '<% if (it.vip) { %>VIP<% } else if (it.total >= 100 && it.country !== "FR") { %>big<% } else { %>-<% } %>',
    "<% if (!it.a || (it.b < it.c && it.d === null)) { %>x<% } %>",
    '<% if (lower(it.plan) === "pro") { %>pro<% } %>',
    "<% for (const item of it.items) { %><%= item.name %><% for (const tag of item.tags) { %><%= tag %><% } %><% } %>",
    "<% if (it.items.length > 0) { %>n<% } %>",
    "<%= it.order.return %> <%= it.options.new %> <%= it.process %> <%= it.self.output %>",
    "<% %>",
    "no tags at all, 100% text %> and <",
  ];
  for (const source of accepted) t.same(checkTemplate(source), { ok: true }, source);
});

t.test("attacks are refused, each with the line, column and token", async (t) => {
  const cases: Array<[string, Partial<TemplateProblem>]> = [
    ["<%= process.exit(1) %>", { line: 1, column: 5, token: "process", message: '"process" is not allowed' }],
    ["<% process.exit(1) %>", { line: 1, column: 4, token: "process" }],
    ["<%= require('child_process').execSync('id') %>", { column: 5, token: "require" }],
    ["<%= it.constructor.constructor('return process')() %>", { column: 8, token: "constructor" }],
    ["<%= it.name.constructor %>", { column: 13, token: "constructor" }],
    ["<%= it.__proto__.polluted %>", { column: 8, token: "__proto__" }],
    ["<% it.__proto__.polluted = 1 %>", { column: 4, token: "it" }],
    ['<%= it["__proto__"] %>', { column: 8, token: '"__proto__"' }],
    ["<%= it.x.prototype %>", { column: 10, token: "prototype" }],
    ["<%= it.__defineGetter__ %>", { column: 8, token: "__defineGetter__" }],
    ["<% while(true){} %>", { column: 4, token: "while", message: '"while" is not allowed' }],
    ["<% for(;;){} %>", { column: 8, token: ";" }],
    ["<% for (const x of it.a) { while (1) {} } %>", { column: 28, token: "while" }],
    ["<% do {} while (1) %>", { column: 4, token: "do" }],
    ["<%~ it.html %>", { column: 1, token: "<%~", message: "raw output <%~ %> is not allowed: use <%= %>" }],
    ["<%= `$" + "{process.env.SECRET}` %>", { column: 5, token: "`" }],
    ["<%= globalThis.process %>", { column: 5, token: "globalThis" }],
    ["<%= this.config %>", { column: 5, token: "this" }],
    ["<%= import('fs') %>", { column: 5, token: "import" }],
    ["<%= eval('1') %>", { column: 5, token: "eval" }],
    ["<%= Function('return process')() %>", { column: 5, token: "Function" }],
    ["<%= new Date() %>", { column: 5, token: "new" }],
    ["<%= (() => process)() %>", { column: 5, token: "(" }],
    ["<%= function () {} %>", { column: 5, token: "function" }],
    ["<%= it.name = 'x' %>", { column: 13, token: "=", message: "assignments are not allowed" }],
    ["<% if (it.a == 1) { %><% } %>", { column: 13, token: "==" }],
    ["<%= it.x /* %> */ process.exit() %>", { column: 10, token: "/*" }],
    ["<%= it.x // %>\nprocess.exit() %>", { column: 10, token: "//" }],
    ["<%= it.x <%= it.y %> %>", { column: 10, token: "<" }],
    ["<%= it.name", { column: 1, token: "<%=", message: "unclosed tag" }],
    ["ok\n  <% if (it.x) { %>never closed", { line: 2, column: 6, token: "if" }],
    ["<% } %>", { column: 4, token: "}" }],
    ["<% } else { %>", { column: 4, message: "else without an open if" }],
    ["<% if (it.a) { %><% } else { %><% } else { %><% } %>", { column: 35, message: "else after the else of this if" }],
    ["<%= it.name; process.exit() %>", { column: 12, token: ";" }],
    ["<%= it.name, process %>", { column: 12, token: "," }],
    ["<%= it['na' + 'me'] %>", { column: 13, token: "+" }],
    ["<%= it[it.k] %>", { column: 8, token: "it" }],
    ["<%= it.x.toString() %>", { column: 18, token: "(" }],
    ["<%= upper(it.x, 'extra') %>", { column: 17, token: '"extra"' }],
    ["<%= fallback(it.x) %>", { column: 18, token: ")" }],
    ["<%= date(it.x, 'dd/mm') %>", { column: 16 }],
    ["<%= fetch('http://x') %>", { column: 5, token: "fetch" }],
    ["<%= it.x\\u0028 %>", { column: 9, token: "\\" }],
    ['<%= fallback(it.x, "\\x3c%") %>', { column: 21, token: "\\" }],
    ["<%= 0x1f %>", { column: 5 }],
    ["<%= 1e999 %>", { column: 5 }],
    ["<% include('other') %>", { column: 4, token: "include" }],
    ["<% layout('x') %>", { column: 4, token: "layout" }],
    ["<%= output %>", { column: 5, token: "output" }],
    ["<% for (const it of it.a) { %><% } %>", { column: 15, token: "it" }],
    ["<% for (const constructor of it.a) { %><% } %>", { column: 15, token: "constructor" }],
    ["<% for (let x of it.a) { %><% } %>", { column: 9, token: "let" }],
    ["<% for (const x in it.a) { %><% } %>", { column: 17, token: "in" }],
    ["<% for (const x of [1, 2]) { %><% } %>", { column: 20, token: "[" }],
    ["<%= x %>", { column: 5, token: "x", message: 'unknown name "x": paths start at it or a loop variable' }],
    ["<%= $ %>", { column: 5, token: "$" }],
    ["<%= 'unterminated %>", { column: 5, message: "unterminated string" }],
    [`<% if (${"!".repeat(100)}it.x) { %><% } %>`, { message: "the condition nests too deeply" }],
    [`<%= ${"upper(".repeat(100)}it.x${")".repeat(100)} %>`, { message: "the expression nests too deeply" }],
    [`${"<% if (it.x) { %>".repeat(40)}${"<% } %>".repeat(40)}`, { message: "blocks nest too deeply" }],
  ];
  for (const [source, expected] of cases) {
    const problem = refused(source);
    t.match(problem, expected, `${JSON.stringify(source)} → ${formatTemplateProblem(problem)}`);
    t.ok(problem.line >= 1 && problem.column >= 1, "a position");
    t.match(formatTemplateProblem(problem), /^line \d+, column \d+: /);
  }
});

t.test("the position counts lines and columns of the whole template", async (t) => {
  t.match(refused("Dear <%= it.name %>,\n\nYour order:\n  <%= it.order.total.toFixed(2) %>\n"), {
    line: 4,
    column: 29,
    token: "(",
  });
});

t.test("property: the checker never throws; a refusal always has a position inside the source", async (t) => {
  fc.assert(
    fc.property(anySource, (source) => {
      const check = checkTemplate(source);
      if (check.ok) return;
      const { line, column, offset } = check.problem;
      const lines = source.split("\n");
      if (!(line >= 1 && line <= lines.length)) throw new Error(`line ${line} outside ${JSON.stringify(source)}`);
      if (!(column >= 1 && column <= (lines[line - 1] ?? "").length + 1)) throw new Error(`column ${column}`);
      if (!(offset >= 0 && offset <= source.length)) throw new Error(`offset ${offset}`);
    }),
    { numRuns: 5000 },
  );
  t.pass("5000 inputs");
});

t.test("property: every template built from the grammar is accepted", async (t) => {
  fc.assert(
    fc.property(template([], 3), ({ source }) => {
      const check = checkTemplate(source);
      if (!check.ok) throw new Error(`${formatTemplateProblem(check.problem)} in ${JSON.stringify(source)}`);
    }),
    { numRuns: 500 },
  );
  t.pass("500 templates");
});

t.test("the checker is linear: a 64 KiB template of tags checks quickly", async (t) => {
  const big = "<%= it.a %> ".repeat(5000).slice(0, 65_536);
  const started = performance.now();
  checkTemplate(big);
  checkTemplate(`${"<%= it.a %>".repeat(5000)}<%= `);
  for (const deep of ["!".repeat(60_000), "(".repeat(60_000), `${"upper(".repeat(10_000)}it.x`]) {
    t.match(
      refused(`<% if (${deep}) { %><% } %>`),
      { message: /nests too deeply/ },
      "deep nesting is refused, no overflow",
    );
  }
  t.ok(performance.now() - started < 2000, "under 2 s");
});
