import { randomUUID } from "node:crypto";
import { expandBroadcastBatch, seedApiKey, seedTemplate } from "@notify/db";
import t from "tap";
import { ingestApp } from "./support.js";

// Broadcasts across clients for the operator (GET /api/v1/ops/broadcasts, POST
// /api/v1/ops/broadcasts/{id}/pause|resume|cancel) and a client's own pause and resume. The
// expansion here is libs/db's batch, the processor's expander's own step: a paused broadcast
// takes none (apps/processor/test/broadcast-pause.test.ts runs the expander itself).
const { app, database } = await ingestApp(t);
const shopAdmin = await seedApiKey(database, { clientId: "shop", name: "shop admin", scopes: ["admin"] });
const bankAdmin = await seedApiKey(database, { clientId: "bank", name: "bank admin", scopes: ["admin"] });
const operator = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const reader = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read", "ingest"] });
await seedTemplate(database, {
  id: "promo",
  params: [],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hi" }],
});
await database.sql`insert into audiences (id, name) values ('aud', 'all')`;
await database.sql`insert into audience_members (audience_id, user_id) select 'aud', 'u-' || lpad(n::text, 3, '0') from generate_series(1, 30) n`;

const call = async (method: string, path: string, key = operator, body?: unknown) => {
  const response = await app.request(`/api/v1${path}`, {
    method,
    headers: {
      "x-api-key": key,
      ...(body === undefined ? {} : { "content-type": "application/json", "idempotency-key": randomUUID() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, checked by t.match and t.same
  return { status: response.status, type: response.headers.get("content-type"), body: (await response.json()) as any };
};
const create = async (key: string) => {
  const answer = await call("POST", "/broadcasts", key, {
    audience_id: "aud",
    category: "deals",
    template_id: "promo",
    data: {},
  });
  if (answer.status !== 202) throw new Error(JSON.stringify(answer.body));
  return answer.body.broadcast_id as string;
};

const shopId = await create(shopAdmin);
const bankId = await create(bankAdmin);

t.test("every client's broadcasts, newest first, with client_id; by status; paged", async (t) => {
  const page = await call("GET", "/ops/broadcasts");
  t.equal(page.status, 200);
  t.match(page.body, { page: 1, page_size: 50, total_count: 2 });
  t.same(
    page.body.data.map((b: { broadcast_id: string; client_id: string }) => [b.broadcast_id, b.client_id]),
    [
      [bankId, "bank"],
      [shopId, "shop"],
    ],
  );
  t.match(page.body.data[0], { status: "expanding", total: 30, expanded: 0, audience_id: "aud", finished_at: null });
  t.match((await call("GET", "/ops/broadcasts?page_size=1&page=2")).body, {
    data: [{ broadcast_id: shopId }],
    page: 2,
    page_size: 1,
    total_count: 2,
  });
  t.match((await call("GET", "/ops/broadcasts?status=paused")).body, { data: [], total_count: 0 });
  // A client's own view has no client_id: the operator's adds it.
  const own = await call("GET", `/broadcasts/${shopId}`, shopAdmin);
  t.notOk("client_id" in own.body);
});

t.test("pause stops expansion; resume goes on from where it stopped; cancel from paused", async (t) => {
  // The expander takes the oldest expanding broadcast: the shop's.
  t.match(await expandBroadcastBatch(database, 10, 2), { kind: "expanded" });
  t.match(await expandBroadcastBatch(database, 10, 2), { kind: "expanded" });
  const paused = await call("POST", `/ops/broadcasts/${shopId}/pause`);
  t.equal(paused.status, 200);
  t.match(paused.body, { broadcast_id: shopId, client_id: "shop", status: "paused", total: 30, expanded: 20 });
  t.match(await expandBroadcastBatch(database, 10, 2), { kind: "expanded" }, "the next expanding one goes on");
  await call("POST", `/ops/broadcasts/${bankId}/pause`);
  t.match(await expandBroadcastBatch(database, 10, 2), { kind: "idle" }, "no paused broadcast takes a batch");
  t.match((await call("GET", "/ops/broadcasts?status=paused")).body, { total_count: 2 });
  t.match((await call("GET", `/ops/broadcasts/${bankId}/pause`)).status, 404, "no GET on an action");

  const resumed = await call("POST", `/broadcasts/${shopId}/resume`, shopAdmin);
  t.equal(resumed.status, 200);
  t.match(resumed.body, { status: "expanding", expanded: 20 });
  t.notOk("client_id" in resumed.body);
  t.match(await expandBroadcastBatch(database, 10, 2), { kind: "expanded" });
  t.match((await call("GET", `/broadcasts/${shopId}`, shopAdmin)).body, { status: "expanding", expanded: 30 });
  t.match(await expandBroadcastBatch(database, 10, 2), { kind: "finished", broadcastId: shopId });
  const [recipients] = await database.sql<{ n: number; users: number }[]>`
    select count(*)::int as n, count(distinct user_id)::int as users from broadcast_recipients where broadcast_id = ${shopId}`;
  t.same(recipients, { n: 30, users: 30 }, "every member once");
  t.match(
    (await call("POST", `/ops/broadcasts/${shopId}/pause`)).body,
    { status: "expanded", expanded: 30 },
    "a finished broadcast is left as it is",
  );

  const cancelled = await call("POST", `/ops/broadcasts/${bankId}/cancel`);
  t.match(cancelled.body, { client_id: "bank", status: "cancelled", expanded: 10 });
  t.ok(cancelled.body.finished_at);
  t.match((await call("POST", `/ops/broadcasts/${bankId}/resume`)).body, { status: "cancelled" }, "not resumed");
  t.match((await call("POST", `/ops/broadcasts/${bankId}/pause`)).body, { status: "cancelled" }, "nor paused");
});

t.test("a client pauses and resumes its own broadcasts only", async (t) => {
  const id = await create(shopAdmin);
  t.equal((await call("POST", `/broadcasts/${id}/pause`, bankAdmin)).status, 404, "another client's: 404");
  t.equal((await call("POST", `/broadcasts/${id}/resume`, bankAdmin)).status, 404);
  t.match((await call("GET", `/ops/broadcasts?status=expanding`)).body.data, [{ broadcast_id: id }]);
  const paused = await call("POST", `/broadcasts/${id}/pause`, shopAdmin);
  t.match(paused.body, { broadcast_id: id, status: "paused" });
  t.match(
    (await call("POST", `/broadcasts/${id}/cancel`, shopAdmin)).body,
    { status: "cancelled" },
    "cancel from paused",
  );
});

t.test("unknown broadcasts are 404; bad queries 400 naming the field", async (t) => {
  for (const action of ["pause", "resume", "cancel"]) {
    const answer = await call("POST", `/ops/broadcasts/${randomUUID()}/${action}`);
    t.equal(answer.status, 404, action);
    t.match(answer.body, { code: "not_found" });
  }
  for (const [query, field] of [
    ["status=nope", "status"],
    ["page=0", "page"],
    ["page_size=x", "page_size"],
    ["extra=1", "extra"],
  ] as const) {
    const answer = await call("GET", `/ops/broadcasts?${query}`);
    t.equal(answer.status, 400, query);
    t.equal(answer.type, "application/problem+json");
    t.ok(
      answer.body.errors.some((e: { field: string }) => e.field === field),
      `${query} names ${field}`,
    );
  }
});

t.test("the operator's routes need the operator scope", async (t) => {
  for (const [method, path] of [
    ["GET", "/ops/broadcasts"],
    ["POST", `/ops/broadcasts/${shopId}/pause`],
    ["POST", `/ops/broadcasts/${shopId}/resume`],
    ["POST", `/ops/broadcasts/${shopId}/cancel`],
    ["POST", `/broadcasts/${shopId}/pause`],
  ]) {
    const answer = await call(method as string, path as string, reader);
    t.equal(answer.status, 403, `${method} ${path}`);
    t.match(answer.body, { code: "insufficient_scope" });
  }
});
