import { randomUUID } from "node:crypto";
import { seedApiKey } from "@notify/db";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// The template API (admin scope): immutable versions, variants per (channel, locale), eta
// bodies checked when written; and ingest checking notifications against the latest version.
const { app, database } = await ingestApp(t, { maxBodyBytes: 262_144 });
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });
const ingestKey = await seedApiKey(database, {
  clientId: "shop",
  name: "ingest",
  scopes: ["ingest", "read", "preferences"],
});

const request = (method: string, path: string, body?: unknown, apiKey = admin) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "x-api-key": apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const json = async (response: Response) => (await response.json()) as Record<string, unknown>;

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as { code: string; errors?: Array<{ field: string; message: string }> };
  t.equal(body.code, code);
  return body;
}

const welcome = {
  default_locale: "en",
  params: ["name", "order.id"],
  variants: [
    {
      channel: "email",
      locale: "en",
      subject: "Welcome, <%= it.name %>",
      body_template: "<p>Order <%= it.order.id %></p>",
    },
    {
      channel: "email",
      locale: "fr",
      subject: "Bienvenue, <%= it.name %>",
      body_template: "<p>Commande <%= it.order.id %></p>",
    },
    { channel: "sms", locale: "en", body_template: "Order <%= it.order.id %> for <%= it.name %>" },
  ],
};

t.test("PUT creates version 1, an identical PUT changes nothing, a new content is version 2", async (t) => {
  const created = await request("PUT", "/templates/welcome", welcome);
  t.equal(created.status, 201);
  t.equal(created.headers.get("location"), "/api/v1/templates/welcome/versions/1");
  const v1 = await json(created);
  t.match(v1, {
    template_id: "welcome",
    version: 1,
    latest_version: 1,
    default_locale: "en",
    params: ["name", "order.id"],
  });
  t.same(v1.variants, [
    {
      channel: "email",
      locale: "en",
      subject: "Welcome, <%= it.name %>",
      body_template: "<p>Order <%= it.order.id %></p>",
    },
    {
      channel: "email",
      locale: "fr",
      subject: "Bienvenue, <%= it.name %>",
      body_template: "<p>Commande <%= it.order.id %></p>",
    },
    { channel: "sms", locale: "en", subject: null, body_template: "Order <%= it.order.id %> for <%= it.name %>" },
  ]);

  const again = await request("PUT", "/templates/welcome", { ...welcome, variants: [...welcome.variants].reverse() });
  t.equal(again.status, 200, "the same content (in another order) writes no version");
  t.equal((await json(again)).version, 1);

  const changed = await request("PUT", "/templates/welcome", {
    ...welcome,
    params: ["name"],
    variants: [
      { channel: "email", locale: "en-gb", subject: "Hiya", body_template: "Hiya <%= it.name %>" },
      {
        channel: "email",
        locale: "en",
        subject: "Hello",
        body_template: "Hello <%= it.name %>",
      },
    ],
  });
  t.equal(changed.status, 201);
  t.equal(changed.headers.get("location"), "/api/v1/templates/welcome/versions/2");
  t.match(await json(changed), { version: 2, latest_version: 2, params: ["name"] });

  const latest = await json(await request("GET", "/templates/welcome"));
  t.match(latest, { version: 2, latest_version: 2 });
  t.same(
    (latest.variants as Array<{ locale: string }>).map((v) => v.locale),
    ["en", "en-GB"],
    "locales are stored canonical",
  );
  const first = await json(await request("GET", "/templates/welcome/versions/1"));
  t.same(first.variants, v1.variants, "version 1 is unchanged: versions are immutable");
  t.match(first, { version: 1, latest_version: 2 });
  await expectProblem(t, await request("GET", "/templates/welcome/versions/3"), 404, "not_found");
  await expectProblem(t, await request("GET", "/templates/welcome/versions/zero"), 404, "not_found");
  await expectProblem(t, await request("GET", "/templates/nope"), 404, "not_found");
});

t.test("ingest checks notifications against the latest version and pins it", async (t) => {
  await request("PUT", "/templates/receipt", {
    params: ["name"],
    variants: [{ channel: "email", locale: "en", subject: "Receipt", body_template: "For <%= it.name %>" }],
  });
  const post = (body: unknown) =>
    app.request("/api/v1/notifications", {
      method: "POST",
      headers: { "x-api-key": ingestKey, "content-type": "application/json", "idempotency-key": randomUUID() },
      body: JSON.stringify(body),
    });
  const base = { user_id: "u1", category: "orders", template_id: "receipt", priority: "transactional" };
  t.equal((await post({ ...base, data: { name: "Ada" } })).status, 202);

  await request("PUT", "/templates/receipt", {
    params: ["name", "total"],
    variants: [
      { channel: "email", locale: "en", subject: "Receipt", body_template: "<%= it.name %>: <%= it.total %>" },
    ],
  });
  const missing = await expectProblem(t, await post({ ...base, data: { name: "Ada" } }), 400, "template_data_invalid");
  t.same(
    missing.errors?.map((e) => e.field),
    ["data.total"],
    "names the missing parameter of version 2",
  );
  const unknown = await expectProblem(
    t,
    await post({ ...base, template_id: "nope", data: {} }),
    400,
    "unknown_template",
  );
  t.ok(unknown.errors?.some((e) => e.field === "template_id"));

  const accepted = (await json(await post({ ...base, data: { name: "Ada", total: "9.99" } }))) as {
    notification_id: string;
  };
  const [row] = await database.sql`select template_version from notifications where id = ${accepted.notification_id}`;
  t.equal(row?.template_version, 2, "the version current at ingest is pinned on the notification");
});

t.test("content checks: every problem named, nothing stored (422 when a template is refused)", async (t) => {
  const body = await expectProblem(
    t,
    await request("PUT", "/templates/broken", {
      default_locale: "de",
      params: ["ok", "1bad", "ok"],
      variants: [
        { channel: "email", locale: "en", body_template: "<%= it.ok %>" },
        { channel: "sms", locale: "en", subject: "no", body_template: "x" },
        { channel: "push", locale: "xx_YY", body_template: "x" },
        { channel: "fax", locale: "en", body_template: "x" },
      ],
    }),
    400,
    "validation_failed",
  );
  t.same((body.errors ?? []).map((e) => e.field).sort(), [
    "params.1",
    "params.2",
    "variants.2.locale",
    "variants.3.channel",
  ]);

  const crossField = await expectProblem(
    t,
    await request("PUT", "/templates/broken", {
      default_locale: "de",
      variants: [
        { channel: "email", locale: "en", body_template: "<%= it.x %>" },
        { channel: "email", locale: "EN", subject: "Dup", body_template: "x" },
        { channel: "sms", locale: "de", subject: "no", body_template: "<% if (it.x { %>" },
        { channel: "push", locale: "de", subject: "<%= it.x", body_template: "x" },
      ],
    }),
    422,
    "template_invalid",
  );
  const problems = crossField.errors ?? [];
  t.same(problems.map((e) => e.field).sort(), [
    "variants",
    "variants.0.subject",
    "variants.1.locale",
    "variants.2.body_template",
    "variants.2.subject",
    "variants.3.subject",
  ]);
  t.match(
    problems.find((e) => e.field === "variants.2.body_template")?.message,
    /^not allowed: line 1, column 13: expected "\)" to close the condition \(at "{"\)/,
  );
  t.match(problems.find((e) => e.field === "variants.3.subject")?.message, /line 1, column 1: unclosed tag/);
  t.match(problems.find((e) => e.field === "variants")?.message, /email variants need one in the default locale de/);
  t.match(problems.find((e) => e.field === "variants.0.subject")?.message, /email variant needs a subject/);
  await expectProblem(t, await request("GET", "/templates/broken"), 404, "not_found");

  await expectProblem(t, await request("PUT", "/templates/has%20space", welcome), 400, "validation_failed");
  await expectProblem(
    t,
    await request("PUT", "/templates/other", { ...welcome, template_id: "welcome" }),
    400,
    "validation_failed",
  );
  await expectProblem(t, await request("PUT", "/templates/other", { variants: [] }), 400, "validation_failed");
});

t.test("concurrent writers get consecutive versions, none lost", async (t) => {
  const writes = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      request("PUT", "/templates/busy", {
        variants: [{ channel: "in_app", locale: "en", body_template: `revision ${i}` }],
      }),
    ),
  );
  t.same(
    writes.map((w) => w.status),
    Array(12).fill(201),
  );
  const versions = await Promise.all(writes.map(async (w) => (await json(w)).version as number));
  t.same(
    [...versions].sort((a, b) => a - b),
    Array.from({ length: 12 }, (_, i) => i + 1),
  );
  t.match(await json(await request("GET", "/templates/busy")), { version: 12, latest_version: 12 });
});

t.test("the list is offset-paginated by id", async (t) => {
  const page = await json(await request("GET", "/templates?page=1&page_size=2"));
  t.match(page, { page: 1, page_size: 2, total_count: 3 });
  t.same(
    (page.data as Array<{ template_id: string }>).map((d) => d.template_id),
    ["busy", "receipt"],
  );
  const next = await json(await request("GET", "/templates?page=2&page_size=2"));
  t.same(
    (next.data as Array<{ template_id: string }>).map((d) => d.template_id),
    ["welcome"],
  );
  t.match(await json(await request("GET", "/templates?page=9")), { data: [], total_count: 3 }, "past the end");
  t.match(await json(await request("GET", "/templates?page_size=5000")), { page_size: 200 }, "clamped");
  await expectProblem(t, await request("GET", "/templates?page=0"), 400, "validation_failed");
  await expectProblem(t, await request("GET", "/templates?page_size=-1"), 400, "validation_failed");
});

t.test("security: only admin keys read or write templates", async (t) => {
  await expectProblem(t, await app.request("/api/v1/templates/welcome"), 401, "unauthenticated");
  await expectProblem(t, await request("GET", "/templates/welcome", undefined, ingestKey), 403, "insufficient_scope");
  await expectProblem(t, await request("GET", "/templates", undefined, ingestKey), 403, "insufficient_scope");
  await expectProblem(t, await request("PUT", "/templates/evil", welcome, ingestKey), 403, "insufficient_scope");
  await expectProblem(t, await request("GET", "/templates/evil"), 404, "not_found");
});
