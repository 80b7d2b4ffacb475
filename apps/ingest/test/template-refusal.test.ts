import { seedApiKey } from "@notify/db";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// PUT /api/v1/templates/{id} refuses a subject or body outside the template subset with 422
// template_invalid, naming the field, the line and the column, and stores nothing.
const { app, database } = await ingestApp(t, { maxBodyBytes: 262_144 });
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });

const put = (id: string, body: unknown) =>
  app.request(`/api/v1/templates/${id}`, {
    method: "PUT",
    headers: { "x-api-key": admin, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

interface Problem {
  status: number;
  code: string;
  detail: string;
  errors?: Array<{ field: string; message: string }>;
}

async function expect422(t: Test, response: Response): Promise<Problem> {
  t.equal(response.status, 422);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as Problem;
  t.equal(body.code, "template_invalid");
  t.equal(body.status, 422);
  return body;
}

const countRows = async () => {
  const [row] = await database.sql<{ n: number }[]>`
    select (select count(*) from templates)::int + (select count(*) from template_versions)::int
         + (select count(*) from template_variants)::int as n`;
  return row?.n ?? -1;
};

const variants = (body: string, subject = "Hi") => [{ channel: "email", locale: "en", subject, body_template: body }];

t.test("a body outside the subset: 422 naming the field and the position, nothing stored", async (t) => {
  const cases: Array<[string, RegExp]> = [
    ["Hi\n<%= process.exit(1) %>", /line 2, column 5: "process" is not allowed/],
    ["<%= require('child_process').execSync('id') %>", /line 1, column 5: "require" is not allowed/],
    ["<%= it.constructor.constructor('return process')() %>", /line 1, column 8: "constructor" is not allowed/],
    ["<% it.__proto__.x = 1 %>", /line 1, column 4: a <% %> tag holds only/],
    ["<% while (true) {} %>", /line 1, column 4: "while" is not allowed/],
    ["<%~ it.html %>", /line 1, column 1: raw output <%~ %> is not allowed/],
    ["<%= `$" + "{it.x}` %>", /line 1, column 5: template literals are not allowed/],
    ["a <%= it.name", /line 1, column 3: unclosed tag/],
  ];
  for (const [body, position] of cases) {
    const problem = await expect422(t, await put("evil", { variants: variants(body) }));
    t.match(problem.errors, [{ field: "variants.0.body_template", message: position }], body);
    t.match(problem.detail, /^variants\.0\.body_template: not allowed: line \d+, column \d+: /);
  }
  t.equal(await countRows(), 0, "no template, version or variant was written");
  const missing = await app.request("/api/v1/templates/evil", { headers: { "x-api-key": admin } });
  t.equal(missing.status, 404);
});

t.test("a subject is held to the same subset", async (t) => {
  const problem = await expect422(t, await put("evil", { variants: variants("ok", "Hi <%= globalThis.x %>") }));
  t.match(problem.errors, [{ field: "variants.0.subject", message: /line 1, column 8: "globalThis" is not allowed/ }]);
});

t.test("a new version outside the subset leaves the template as it was", async (t) => {
  const created = await put("kept", { params: ["name"], variants: variants("Hello <%= upper(it.name) %>") });
  t.equal(created.status, 201);
  const before = await countRows();
  const problem = await expect422(
    t,
    await put("kept", {
      params: ["name"],
      variants: [
        ...variants("Hello <%= it.name %>"),
        { channel: "sms", locale: "en", body_template: "<% for (const x of it.items) { %><%= x.constructor %><% } %>" },
      ],
    }),
  );
  t.match(problem.errors, [
    { field: "variants.1.body_template", message: /line 1, column 40: "constructor" is not allowed/ },
  ]);
  t.equal(await countRows(), before, "no version written");
  const latest = (await (await app.request("/api/v1/templates/kept", { headers: { "x-api-key": admin } })).json()) as {
    version: number;
  };
  t.equal(latest.version, 1);
});

t.test("templates of the subset are accepted", async (t) => {
  const response = await put("ok", {
    params: ["name", "items"],
    variants: variants(
      '<%= fallback(it.nick, "friend") %>: <% for (const item of it.items) { %><%= item.name %> <%= number(item.price, 2) %><% } %><% if (it.vip) { %>VIP<% } else { %>-<% } %>',
      "Hi <%= upper(it.name) %>",
    ),
  });
  t.equal(response.status, 201);
});
