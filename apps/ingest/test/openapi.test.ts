import { NOTIFICATION_STATUS_DESCRIPTIONS, NOTIFICATION_STATUSES, WEBHOOK_EVENT_TYPES } from "@notify/core";
import { seedApiKey } from "@notify/db";
import { Validator } from "@seriousme/openapi-schema-validator";
import t from "tap";
import { ingestApp } from "./support.js";

const { app, database } = await ingestApp(t);
const response = await app.request("/api/v1/openapi.json");
const doc = (await response.json()) as {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
};

t.test("the document is served without a key and is valid OpenAPI 3.1", async (t) => {
  t.equal(response.status, 200);
  t.equal(doc.openapi, "3.1.0");
  const result = await new Validator().validate(doc as never);
  t.same(result.errors ?? [], [], "no schema errors");
  t.ok(result.valid);
});

t.test("every route the app serves under /api/v1 is documented, and nothing else", async (t) => {
  const served = new Set(
    app.routes
      .filter((r) => r.path.startsWith("/api/v1/") && r.method !== "ALL")
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, "{$1}")}`),
  );
  const documented = new Set(
    Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m} ${path}`)),
  );
  t.same([...served].sort(), [...documented].sort());
  t.ok(documented.size > 0);
});

t.test("every problem a route may answer with is in its responses, as problem+json", async (t) => {
  const post = doc.paths["/api/v1/notifications"]?.post as unknown as {
    responses: Record<string, { content?: Record<string, unknown> }>;
  };
  for (const status of ["200", "202", "400", "401", "403", "409", "410", "413", "415", "422", "429", "503"]) {
    t.ok(post.responses[status], `POST /notifications documents ${status}`);
  }
  t.ok(post.responses["400"]?.content?.["application/problem+json"]);
  const body = JSON.stringify(post);
  for (const code of ["idempotency_key_missing", "template_data_invalid", "idempotency_key_reused", "rate_limited"])
    t.match(body, code);
});

t.test("request schemas are the handlers' own: a documented enum is what validation accepts", async (t) => {
  const body = JSON.stringify(doc.paths["/api/v1/notifications"]?.post);
  t.match(body, /"enum":\["transactional","promotional"\]/);
  const key = await seedApiKey(database, { clientId: "c", name: "k", scopes: ["ingest"] });
  const refused = await app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": "k1" },
    body: JSON.stringify({ user_id: "u", category: "c", template_id: "t", data: {}, priority: "urgent" }),
  });
  t.equal(refused.status, 400);
});

t.test("a notification's status is documented as the closed enum, each value explained", async (t) => {
  const get = doc.paths["/api/v1/notifications/{id}"]?.get as unknown as {
    responses: Record<string, { content: Record<string, { schema: { properties: Record<string, unknown> } }> }>;
  };
  const status = get.responses["200"]?.content["application/json"]?.schema.properties.status as {
    enum: string[];
    description: string;
    "x-enum-descriptions": string[];
  };
  t.same(status.enum, [...NOTIFICATION_STATUSES]);
  t.same(
    status["x-enum-descriptions"],
    NOTIFICATION_STATUSES.map((s) => NOTIFICATION_STATUS_DESCRIPTIONS[s]),
  );
  for (const value of NOTIFICATION_STATUSES) t.match(status.description, `\`${value}\`: `);
  const list = JSON.stringify(doc.paths["/api/v1/users/{id}/notifications"]?.get);
  t.match(list, /"enum":\["accepted","processing"/, "the list's items carry the same enum");
});

t.test("every webhook event type is described under webhooks, with the Standard Webhooks headers", async (t) => {
  const webhooks = (doc as unknown as { webhooks: Record<string, { post: Record<string, unknown> }> }).webhooks;
  t.same(Object.keys(webhooks).sort(), [...WEBHOOK_EVENT_TYPES, "ping"].sort());
  for (const [type, item] of Object.entries(webhooks)) {
    const post = JSON.stringify(item.post);
    for (const header of ["webhook-id", "webhook-timestamp", "webhook-signature"]) t.match(post, `"name":"${header}"`);
    t.match(post, `"type":{"const":"${type}"}`, `${type}: its body's type`);
  }
  t.match(JSON.stringify(webhooks["channel.bounced"]), /"provider_id"/, "a channel event's data has its provider ids");
});

t.test("a readable, self-contained docs page", async (t) => {
  const page = await app.request("/api/v1/docs");
  t.equal(page.status, 200);
  t.match(page.headers.get("content-type"), /text\/html/);
  t.match(page.headers.get("content-security-policy"), /default-src 'none'/);
  const html = await page.text();
  t.match(html, "/api/v1/notifications");
  t.notMatch(html, /<script/);
});
