import { seedApiKey } from "@notify/db";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// The webhook endpoints API through app.request(), on a real Postgres database: who may use it,
// what a URL may be (no private address: SSRF), what each client sees (its own only), secrets
// shown once and rotated, and bad input answered with a problem that leaves nothing behind.
const { app, database } = await ingestApp(t, { maxBodyBytes: 8192 });
const shopAdmin = await seedApiKey(database, { clientId: "shop", name: "shop admin", scopes: ["admin"] });
const shopHooks = await seedApiKey(database, { clientId: "shop", name: "shop hooks", scopes: ["webhooks"] });
const shopIngest = await seedApiKey(database, { clientId: "shop", name: "shop ingest", scopes: ["ingest", "read"] });
const blogAdmin = await seedApiKey(database, { clientId: "blog", name: "blog admin", scopes: ["admin"] });

const call = (method: string, path: string, key: string, body?: unknown) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as { code: string; detail?: string };
  t.match(body, { status, code });
  return body;
}

const count = async () => Number((await database.sql`select count(*) from webhook_endpoints`)[0]?.count);

t.test("the webhooks scope (or admin) is needed", async (t) => {
  await expectProblem(t, await call("GET", "/webhook-endpoints", shopIngest), 403, "insufficient_scope");
  t.equal((await call("GET", "/webhook-endpoints", shopHooks)).status, 200);
  t.equal((await call("GET", "/webhook-endpoints", shopAdmin)).status, 200);
});

t.test("a URL must be https on a public host", async (t) => {
  const refused = [
    "http://hooks.example.com/x",
    "https://127.0.0.1/x",
    "https://10.1.2.3/x",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]/x",
    "https://[::ffff:127.0.0.1]/x",
    "https://localhost/x",
    "https://hooks.internal/x",
    "https://intranet/x",
    "https://user:pass@hooks.example.com/x",
    "ftp://hooks.example.com/x",
    "not a url",
  ];
  const before = await count();
  for (const url of refused) {
    const body = await expectProblem(
      t,
      await call("POST", "/webhook-endpoints", shopHooks, { url }),
      400,
      "validation_failed",
    );
    t.ok(body.detail, `${url}: ${body.detail}`);
  }
  t.equal(await count(), before, "nothing stored");
  await expectProblem(
    t,
    await call("POST", "/webhook-endpoints", shopHooks, { url: "https://hooks.example.com/x", event_types: ["nope"] }),
    400,
    "validation_failed",
  );
  await expectProblem(
    t,
    await call("POST", "/webhook-endpoints", shopHooks, { url: "https://hooks.example.com/x", extra: 1 }),
    400,
    "validation_failed",
  );
  t.equal(await count(), before, "nothing stored");
});

t.test("an endpoint's secret is shown once; the client sees only its own endpoints", async (t) => {
  const created = await call("POST", "/webhook-endpoints", shopHooks, {
    url: "https://hooks.example.com/notify",
    event_types: ["channel.delivered", "channel.bounced"],
    description: "delivery reports",
  });
  t.equal(created.status, 201);
  t.equal(created.headers.get("cache-control"), "no-store");
  const endpoint = (await created.json()) as { id: string; secret: string; event_types: string[] };
  t.match(endpoint.secret, /^whsec_/);
  t.same(endpoint.event_types, ["channel.delivered", "channel.bounced"]);
  t.equal(created.headers.get("location"), `/api/v1/webhook-endpoints/${endpoint.id}`);

  const listed = (await (await call("GET", "/webhook-endpoints", shopHooks)).json()) as {
    data: Array<Record<string, unknown>>;
  };
  const mine = listed.data.find((e) => e.id === endpoint.id);
  t.ok(mine);
  t.notOk("secret" in (mine ?? {}), "a listing never shows a secret");
  const read = await call("GET", `/webhook-endpoints/${endpoint.id}`, shopHooks);
  t.equal(read.status, 200);
  const shown = (await read.json()) as Record<string, unknown>;
  t.notOk("secret" in shown);
  t.match(shown, { figures: { backlog: 0, dead: 0, last_hour: { attempts: 0 } } });

  // Another client: not listed, and every route on it is a 404.
  const theirs = (await (await call("GET", "/webhook-endpoints", blogAdmin)).json()) as { data: unknown[] };
  t.same(theirs.data, []);
  for (const [method, path, body] of [
    ["GET", `/webhook-endpoints/${endpoint.id}`],
    ["PATCH", `/webhook-endpoints/${endpoint.id}`, { description: "mine now" }],
    ["DELETE", `/webhook-endpoints/${endpoint.id}`],
    ["POST", `/webhook-endpoints/${endpoint.id}/rotate-secret`, {}],
    ["GET", `/webhook-endpoints/${endpoint.id}/attempts`],
    ["GET", `/webhook-endpoints/${endpoint.id}/dead-letters`],
    ["POST", `/webhook-endpoints/${endpoint.id}/replay`, { since: new Date(Date.now() - 3_600_000).toISOString() }],
    ["POST", `/webhook-endpoints/${endpoint.id}/test`],
  ] as Array<[string, string, unknown?]>) {
    await expectProblem(t, await call(method, path, blogAdmin, body), 404, "not_found");
  }
  const [row] = await database.sql`select description from webhook_endpoints where id = ${endpoint.id}`;
  t.equal(row?.description, "delivery reports", "untouched by the other client");
});

t.test("rotation gives a new secret; the old one signs until its grace ends", async (t) => {
  const created = (await (
    await call("POST", "/webhook-endpoints", shopHooks, { url: "https://hooks.example.com/rotate" })
  ).json()) as { id: string; secret: string };
  const rotated = await call("POST", `/webhook-endpoints/${created.id}/rotate-secret`, shopHooks, {
    grace_seconds: 3600,
  });
  t.equal(rotated.status, 200);
  const body = (await rotated.json()) as { secret: string; previous_secret_expires_at: string };
  t.not(body.secret, created.secret);
  const expires = Date.parse(body.previous_secret_expires_at) - Date.now();
  t.ok(expires > 3500_000 && expires <= 3600_000, "the grace is an hour");
  const [row] = await database.sql`select secret, previous_secret from webhook_endpoints where id = ${created.id}`;
  t.equal(row?.secret, body.secret);
  t.equal(row?.previous_secret, created.secret);
  await expectProblem(
    t,
    await call("POST", `/webhook-endpoints/${created.id}/rotate-secret`, shopHooks, { grace_seconds: 30 * 86_400 }),
    400,
    "validation_failed",
  );
});

t.test("an endpoint is changed, disabled, enabled and deleted", async (t) => {
  const created = (await (
    await call("POST", "/webhook-endpoints", shopHooks, { url: "https://hooks.example.com/change" })
  ).json()) as { id: string };
  const path = `/webhook-endpoints/${created.id}`;
  await expectProblem(
    t,
    await call("PATCH", path, shopHooks, { url: "https://192.168.1.1/x" }),
    400,
    "validation_failed",
  );
  const disabled = await call("PATCH", path, shopHooks, { enabled: false, event_types: ["inbox.read"] });
  t.equal(disabled.status, 200);
  t.match(await disabled.json(), { status: "disabled", disabled_reason: "by_client", event_types: ["inbox.read"] });
  await database.sql`update webhook_endpoints set failing_since = now() where id = ${created.id}`;
  const enabled = await call("PATCH", path, shopHooks, { enabled: true, event_types: null });
  t.match(await enabled.json(), { status: "enabled", disabled_reason: null, failing_since: null, event_types: null });
  t.equal((await call("DELETE", path, shopHooks)).status, 204);
  await expectProblem(t, await call("GET", path, shopHooks), 404, "not_found");
});

t.test("a replay names a range or events, not both", async (t) => {
  const created = (await (
    await call("POST", "/webhook-endpoints", shopHooks, { url: "https://hooks.example.com/replay" })
  ).json()) as { id: string };
  const path = `/webhook-endpoints/${created.id}/replay`;
  for (const body of [
    {},
    { since: "2026-01-01T00:00:00Z", event_ids: ["evt_1"] },
    { until: "2026-01-01T00:00:00Z" },
    { event_ids: ["1"] },
    { since: "yesterday" },
    { since: "2026-01-01T00:00:00Z", until: "2025-01-01T00:00:00Z" },
    { since: "2020-01-01T00:00:00Z", until: "2026-01-01T00:00:00Z" },
  ]) {
    await expectProblem(t, await call("POST", path, shopHooks, body), 400, "validation_failed");
  }
  const replayed = await call("POST", path, shopHooks, { event_ids: ["evt_99999"] });
  t.equal(replayed.status, 202);
  t.same(await replayed.json(), { replayed: 0 }, "no such event of this client");
});

t.test("a client has at most twenty endpoints", async (t) => {
  const key = await seedApiKey(database, { clientId: "many", name: "many", scopes: ["webhooks"] });
  for (let i = 0; i < 20; i++) {
    t.equal((await call("POST", "/webhook-endpoints", key, { url: `https://hooks.example.com/${i}` })).status, 201);
  }
  await expectProblem(
    t,
    await call("POST", "/webhook-endpoints", key, { url: "https://hooks.example.com/21" }),
    400,
    "validation_failed",
  );
});

t.test("concurrent creates never take a client past twenty endpoints", async (t) => {
  const key = await seedApiKey(database, { clientId: "rush", name: "rush", scopes: ["webhooks"] });
  const responses = await Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      call("POST", "/webhook-endpoints", key, { url: `https://hooks.example.com/${i}` }),
    ),
  );
  const created = responses.filter((r) => r.status === 201);
  t.equal(created.length, 20, "twenty created");
  for (const response of responses.filter((r) => r.status !== 201)) {
    await expectProblem(t, response, 400, "validation_failed");
  }
  const [row] = await database.sql`select count(*) from webhook_endpoints where client_id = 'rush'`;
  t.equal(Number(row?.count), 20, "twenty stored");
});

t.test("the operator's listing has every endpoint's figures, as the endpoint's own route does", async (t) => {
  const statsKey = await seedApiKey(database, { clientId: "stats", name: "stats", scopes: ["webhooks"] });
  const operator = await seedApiKey(database, { clientId: "ops", name: "ops", scopes: ["operator"] });
  const create = async (url: string) =>
    ((await (await call("POST", "/webhook-endpoints", statsKey, { url })).json()) as { id: string }).id;
  const busy = await create("https://hooks.example.com/busy");
  const idle = await create("https://hooks.example.com/idle");
  const events = await database.sql<Array<{ id: string }>>`
    insert into webhook_events (client_id, type, data)
    select 'stats', 'channel.failed', '{}' from generate_series(1, 4) returning id`;
  const [e1, e2, e3, e4] = events.map((e) => e.id) as [string, string, string, string];
  // What the event trigger made owed is replaced by deliveries in each state.
  await database.sql`delete from webhook_deliveries where endpoint_id in (${busy}, ${idle})`;
  await database.sql`
    insert into webhook_deliveries (endpoint_id, event_id, status) values
      (${busy}, ${e1}, 'waiting'), (${busy}, ${e2}, 'queued'), (${busy}, ${e3}, 'dead'), (${busy}, ${e4}, 'delivered')`;
  await database.sql`
    insert into webhook_attempts (endpoint_id, event_id, attempt, status_code, latency_ms, at) values
      (${busy}, ${e1}, 1, 500, 100, now()), (${busy}, ${e2}, 1, 200, 300, now()),
      (${busy}, ${e3}, 1, 200, 200, now() - interval '2 hours')`;

  const listed = await call("GET", "/ops/webhook-endpoints", operator);
  t.equal(listed.status, 200);
  const { data } = (await listed.json()) as { data: Array<{ id: string; figures: unknown }> };
  const figuresOf = (id: string) => data.find((e) => e.id === id)?.figures;
  t.same(figuresOf(busy), {
    backlog: 2,
    dead: 1,
    last_hour: { attempts: 2, succeeded: 1, failed: 1, latency_ms_p50: 100, latency_ms_p95: 300 },
  });
  t.same(figuresOf(idle), {
    backlog: 0,
    dead: 0,
    last_hour: { attempts: 0, succeeded: 0, failed: 0, latency_ms_p50: null, latency_ms_p95: null },
  });
  t.ok(
    data.every((e) => e.figures !== undefined),
    "every endpoint has its figures",
  );
  const own = (await (await call("GET", `/webhook-endpoints/${busy}`, statsKey)).json()) as { figures: unknown };
  t.same(own.figures, figuresOf(busy), "the same figures on the endpoint's own route");
});

t.test("an endpoint's events carry addresses and data only for a key that may have them", async (t) => {
  const before = await count();
  for (const include of [["recipient"], ["notification_data"]]) {
    await expectProblem(
      t,
      await call("POST", "/webhook-endpoints", shopHooks, { url: "https://hooks.example.com/more", include }),
      403,
      "insufficient_scope",
    );
  }
  await expectProblem(
    t,
    await call("POST", "/webhook-endpoints", shopAdmin, { url: "https://hooks.example.com/x", include: ["body"] }),
    400,
    "validation_failed",
  );
  await expectProblem(
    t,
    await call("POST", "/webhook-endpoints", shopAdmin, {
      url: "https://hooks.example.com/x",
      include: ["notification_data", "notification_data"],
    }),
    400,
    "validation_failed",
  );
  t.equal(await count(), before, "nothing stored");

  const created = await call("POST", "/webhook-endpoints", shopAdmin, {
    url: "https://hooks.example.com/data",
    include: ["notification_data", "recipient"],
  });
  t.equal(created.status, 201);
  const { id, include } = (await created.json()) as { id: string; include: string[] };
  t.same(include, ["notification_data", "recipient"]);
  t.same(((await (await call("GET", `/webhook-endpoints/${id}`, shopHooks)).json()) as { include: string[] }).include, [
    "notification_data",
    "recipient",
  ]);
  // A webhooks-only key may not send what the endpoint includes anywhere else, or again.
  for (const change of [
    { url: "https://attacker.example.com/in" },
    { event_types: ["channel.failed"] },
    { enabled: true },
  ]) {
    await expectProblem(
      t,
      await call("PATCH", `/webhook-endpoints/${id}`, shopHooks, change),
      403,
      "insufficient_scope",
    );
  }
  t.equal(
    ((await (await call("GET", `/webhook-endpoints/${id}`, shopAdmin)).json()) as { url: string }).url,
    "https://hooks.example.com/data",
    "the url is unchanged",
  );
  t.equal((await call("PATCH", `/webhook-endpoints/${id}`, shopHooks, { description: "ours" })).status, 200);
  t.equal((await call("PATCH", `/webhook-endpoints/${id}`, shopHooks, { enabled: false })).status, 200);
  const dropped = await call("PATCH", `/webhook-endpoints/${id}`, shopHooks, {
    include: [],
    url: "https://hooks.example.com/plain",
  });
  t.equal(dropped.status, 200, "it may drop what it includes, and then move it");
  t.same(((await dropped.json()) as { include: string[] }).include, []);
  t.equal((await call("DELETE", `/webhook-endpoints/${id}`, shopAdmin)).status, 204);
});
