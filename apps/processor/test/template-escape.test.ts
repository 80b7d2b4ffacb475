import { checkTemplate, TemplateRenderError, TemplateSyntaxError, templateEngineOptions } from "@notify/core";
import { seedTemplate } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import { Eta } from "eta";
import fc from "fast-check";
import t from "tap";
import { createRenderer } from "../src/routing/render.js";

// Templates cannot run code: the engine the processor renders with refuses every template
// outside the logic-less subset (and never runs what the author wrote), the templates the
// repository ships render as plain eta renders them, a stored unsafe template fails its notification
// with template_invalid, and no accepted template can stall a render.

const engines = { html: new Eta(templateEngineOptions(true)), plain: new Eta(templateEngineOptions(false)) };
// Plain eta without the subset (it runs a template's JavaScript), to compare the shipped templates with.
const before = {
  html: new Eta({ autoEscape: true, autoTrim: false, useWith: false, varName: "it" }),
  plain: new Eta({ autoEscape: false, autoTrim: false, useWith: false, varName: "it" }),
};
const render = (engine: Eta, source: string, data: object): string => {
  const fn = engine.compile(source);
  return fn.call(engine, data as never) as string;
};

const sentinel = globalThis as { __pwned?: unknown };
const attacks = [
  "<%= process.exit(1) %>",
  "<% process.exit(1) %>",
  "<% globalThis.__pwned = 1 %>",
  "<%= (globalThis.__pwned = 1) %>",
  "<%= require('child_process').execSync('touch /tmp/pwned') %>",
  "<%= it.constructor.constructor('globalThis.__pwned = 1')() %>",
  "<%= it.name.constructor.constructor('return process')().exit() %>",
  "<% it.__proto__.polluted = 1 %>",
  "<% Object.prototype.polluted = 1 %>",
  "<%= it['__proto__']['polluted'] %>",
  "<% while (true) {} %>",
  "<% for (;;) {} %>",
  "<% for (const x of it.a) { it.a.push(x) } %>",
  "<%~ it.html %>",
  "<%= `$" + "{globalThis.__pwned = 1}` %>",
  "<%= this.config %>",
  "<%= this.render('x') %>",
  "<%= include('x') %>",
  "<%= it.x /* %> */ + (globalThis.__pwned = 1) %>",
  "<%= it.x // %>\n(globalThis.__pwned = 1) %>",
  "<%= it.x <%= globalThis.__pwned = 1 %> %>",
  "<%= it.name",
  "<% if (it.x) { %>never closed",
  "<% } globalThis.__pwned = 1; { %>",
  '<%= fallback(it.x, "\\u0022); globalThis.__pwned = 1; (\\"") %>',
  "<%= __eta.res %>",
  "<%= options %>",
  "<% for (const x of it.a) { %><% } globalThis.__pwned = 1; for (const y of it.a) { %><% } %>",
];

t.test("attack templates are refused by the engine itself, with a position, and never run", async (t) => {
  for (const source of attacks) {
    for (const engine of [engines.html, engines.plain]) {
      let refusal: unknown = null;
      try {
        render(engine, source, { name: "x", a: [1], x: 1 });
      } catch (error) {
        refusal = error;
      }
      t.ok(
        refusal instanceof TemplateSyntaxError && refusal.problem.line >= 1 && refusal.problem.column >= 1,
        `${JSON.stringify(source)}: ${String(refusal)}`,
      );
    }
    t.equal(checkTemplate(source).ok, false, `the checker refuses ${JSON.stringify(source)}`);
  }
  t.equal(sentinel.__pwned, undefined, "no template ran");
  t.equal(({} as { polluted?: unknown }).polluted, undefined, "no prototype polluted");
});

t.test("the templates the repository ships and documents render as they did", async (t) => {
  const data = { name: "Zoë <3 & \"co\" 'x'", city: "Lyon", total: 9.99, order: { id: "A-1 <b>" } };
  const shipped = [
    "Welcome, <%= it.name %>!",
    "<h1>Hello <%= it.name %></h1><p>Thanks for joining.</p>",
    "Hello <%= it.name %>, thanks for joining.",
    "Hello <%= it.name %>!",
    "<p>Deal for <%= it.name %></p>",
    "Order <%= it.order.id %> for <%= it.name %>",
    "<p>Commande <%= it.order.id %></p>",
    "Hello <%= it.name %> of <%= it.city %>",
    "<%= it.name %>: <%= it.total %>",
    "Order <%= it.order.id %>",
    "revision 3",
    "<%-= it.name -%>\nline\n<%_= it.city _%>  ",
  ];
  for (const source of shipped) {
    for (const kind of ["html", "plain"] as const) {
      t.equal(render(engines[kind], source, data), render(before[kind], source, data), `${kind}: ${source}`);
    }
  }
});

t.test("filters, conditions and loops render", async (t) => {
  const data = {
    name: "  Ada  ",
    vip: false,
    total: "1234.5",
    at: "2026-03-08T06:30:00Z",
    items: [
      { name: "tea", qty: 2 },
      { name: "<cake>", qty: 0 },
    ],
    tags: ["a", "b"],
  };
  const source = [
    '<%= upper(trim(it.name)) %>|<%= lower(it.name) %>|<%= fallback(it.nick, "friend") %>',
    '|<%= number(it.total, 2) %>|<%= date(it.at) %>|<%= date(it.at, "datetime") %>|<%= join(it.tags, "+") %>',
    '<% if (it.vip) { %>|vip<% } else if (it.total !== "0" && it.items.length >= 2) { %>|many<% } else { %>|none<% } %>',
    "<% for (const item of it.items) { %>|<%= item.name %><% if (item.qty > 0) { %> x<%= item.qty %><% } %><% } %>",
    "<% for (const none of it.missing) { %>never<% } %>",
  ].join("");
  t.equal(
    render(engines.html, source, data),
    "ADA|  ada  |friend|1234.50|2026-03-08|2026-03-08 06:30 UTC|a+b|many|tea x2|&lt;cake&gt;",
  );
  t.equal(render(engines.plain, "<%= it.items[1].name %> <%= it.nothing %>.", data), "<cake> .");
  t.equal(render(engines.plain, "<%= it.name.length %> <%= it.tags.length %>", data), "7 2");
  t.equal(render(engines.plain, "<%= it.tags.constructorx %><%= it.toString %>", data), "", "own properties only");
});

t.test("no accepted template stalls a render: loops and output are bounded", async (t) => {
  const list = Array.from({ length: 1000 }, (_, i) => i);
  const cube =
    "<% for (const a of it.l) { %><% for (const b of it.l) { %><% for (const c of it.l) { %>x<% } %><% } %><% } %>";
  const started = performance.now();
  t.throws(() => render(engines.plain, cube, { l: list }), TemplateRenderError, "10⁹ iterations are stopped");
  const wide = "<% for (const a of it.l) { %><%= it.big %><% } %>";
  t.throws(() => render(engines.plain, wide, { l: list, big: "y".repeat(10_000) }), TemplateRenderError, "output cap");
  const text = `<% for (const a of it.l) { %>${"z".repeat(60_000)}<% } %>`;
  t.throws(() => render(engines.plain, text, { l: list }), TemplateRenderError, "output cap on text too");
  t.ok(performance.now() - started < 5000, "stopped within seconds");
});

// Templates from the grammar: text, paths, filters, conditions and loops, nested at random.
const name = fc.constantFrom("a", "b", "name", "items", "n", "0", "length", "toString", "valueOf");
const path = (roots: string[]) =>
  fc
    .tuple(
      fc.constantFrom(...roots),
      fc.array(
        fc.oneof(
          name.map((n) => (/^\d/.test(n) ? `[${n}]` : `.${n}`)),
          fc.constant("[1]"),
        ),
        { maxLength: 3 },
      ),
    )
    .map(([root, steps]) => root + steps.join(""));
const expr = (roots: string[]) =>
  fc.oneof(
    path(roots),
    path(roots).map((p) => `upper(${p})`),
    path(roots).map((p) => `fallback(lower(${p}), "-")`),
    path(roots).map((p) => `number(${p}, 2)`),
    path(roots).map((p) => `date(${p}, "datetime")`),
    path(roots).map((p) => `join(${p})`),
  );
const cond = (roots: string[]) =>
  fc.oneof(
    expr(roots),
    expr(roots).map((e) => `!${e}`),
    fc
      .tuple(
        expr(roots),
        fc.constantFrom("===", "!==", "<", ">", "<=", ">="),
        fc.oneof(expr(roots), fc.constant('"x"'), fc.constant("1")),
      )
      .map(([a, op, b]) => `${a} ${op} ${b}`),
    fc.tuple(expr(roots), expr(roots)).map(([a, b]) => `(${a} && !${b}) || ${a}`),
  );
const body = (roots: string[], depth: number): fc.Arbitrary<string> => {
  const leaf = fc.oneof(
    // Text never holds "<" before "%", alone or with the next part: one text ending in "<" and
    // the next starting with "%" made an opening tag of the grammar's own output.
    fc.string({ maxLength: 8 }).map((s) => s.replaceAll("<", "< ")),
    expr(roots).map((e) => `<%= ${e} %>`),
  );
  if (depth <= 0) return leaf;
  const loopVar = `v${depth}`;
  return fc.oneof(
    leaf,
    fc
      .tuple(cond(roots), body(roots, depth - 1), body(roots, depth - 1))
      .map(([c, yes, no]) => `<% if (${c}) { %>${yes}<% } else { %>${no}<% } %>`),
    fc
      .tuple(path(roots), body([...roots, loopVar], depth - 1))
      .map(([list, inner]) => `<% for (const ${loopVar} of ${list}) { %>${inner}<% } %>`),
  );
};
const template = fc.array(body(["it"], 3), { minLength: 1, maxLength: 4 }).map((parts) => parts.join(""));
const data = fc.dictionary(
  fc.constantFrom("a", "b", "name", "items", "n", "toString", "valueOf", "__proto__"),
  fc.jsonValue({ maxDepth: 3 }),
);

const rendersOrFailsCleanly = (engine: Eta, source: string, value: object): void => {
  try {
    const out = render(engine, source, value);
    if (typeof out !== "string") throw new Error("not a string");
  } catch (error) {
    if (!(error instanceof TemplateRenderError)) throw error;
  }
};

t.test("property: every template of the grammar is accepted and renders random data without crashing", async (t) => {
  fc.assert(
    fc.property(template, data, fc.boolean(), (source, value, html) => {
      const check = checkTemplate(source);
      if (!check.ok) throw new Error(`refused ${source}: ${JSON.stringify(check.problem)}`);
      rendersOrFailsCleanly(html ? engines.html : engines.plain, source, JSON.parse(JSON.stringify(value)));
    }),
    { numRuns: 1500 },
  );
  t.equal(sentinel.__pwned, undefined);
});

t.test("property: whatever the checker accepts of random input renders without crashing", async (t) => {
  const soup = fc
    .array(
      fc.constantFrom(
        "<%=",
        "<%",
        "%>",
        "-%>",
        " it",
        ".a",
        "[0]",
        "(",
        ")",
        "{",
        "}",
        "if",
        "} else {",
        "for (const x of",
        "x",
        "upper",
        '"s"',
        "!",
        "&&",
      ),
      { maxLength: 24 },
    )
    .map((p) => p.join(" "));
  let accepted = 0;
  fc.assert(
    fc.property(fc.oneof(soup, fc.string({ maxLength: 60 })), data, (source, value) => {
      if (!checkTemplate(source).ok) return;
      accepted++;
      rendersOrFailsCleanly(engines.html, source, JSON.parse(JSON.stringify(value)));
    }),
    { numRuns: 3000 },
  );
  t.ok(accepted > 0, `${accepted} accepted inputs rendered`);
});

t.test("a stored template outside the subset fails its notification with template_invalid", async (t) => {
  const { database } = await freshDatabase(t);
  await seedTemplate(database, {
    id: "old-evil",
    params: ["name"],
    variants: [
      { channel: "email", locale: "en", subject: "Hi <%= it.name %>", body: "<% globalThis.__pwned = 1 %>Hello" },
      {
        channel: "sms",
        locale: "en",
        subject: null,
        body: "<%= it.constructor.constructor('return process')().pid %>",
      },
      { channel: "push", locale: "en", subject: "<%~ it.name %>", body: "<%= it.name %>" },
      { channel: "in_app", locale: "en", subject: null, body: "Hello <%= upper(it.name) %>" },
    ],
  });
  const renderer = createRenderer(database);
  const request = { templateId: "old-evil", version: 1, locale: null, data: { name: "Ada" } };
  const email = await renderer({ ...request, channel: "email" });
  t.match(email, { ok: false, reason: "template_invalid", detail: /body of the email en variant .*line 1, column 4/ });
  t.match(await renderer({ ...request, channel: "sms" }), {
    ok: false,
    reason: "template_invalid",
    detail: /constructor/,
  });
  t.match(await renderer({ ...request, channel: "push" }), {
    ok: false,
    reason: "template_invalid",
    detail: /subject .*raw output/,
  });
  t.match(await renderer({ ...request, channel: "email" }), { reason: "template_invalid" }, "refused again (cached)");
  t.match(await renderer({ ...request, channel: "in_app" }), { ok: true, body: "Hello ADA" }, "safe variants render");
  t.equal(sentinel.__pwned, undefined, "nothing ran");

  await seedTemplate(database, {
    id: "bomb",
    params: [],
    variants: [
      {
        channel: "sms",
        locale: "en",
        subject: null,
        body: "<% for (const a of it.l) { %><% for (const b of it.l) { %><% for (const c of it.l) { %>x<% } %><% } %><% } %>",
      },
    ],
  });
  const bomb = await renderer({
    templateId: "bomb",
    version: 1,
    channel: "sms",
    locale: null,
    data: { l: Array.from({ length: 2000 }, (_, i) => i) },
  });
  t.match(
    bomb,
    { ok: false, reason: "render_failed", detail: /iterations/ },
    "a loop bomb fails, the processor goes on",
  );
});
