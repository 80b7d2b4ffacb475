import { randomUUID } from "node:crypto";
import { connectBus } from "@notify/bus";
import { seedApiKey, seedTemplate, storeInboxItem } from "@notify/db";
import { PROBLEM_TYPE_BASE } from "@notify/http";
import { deadLetterOf, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { cancelResponder, deadLetterResponder, ingestApp } from "./support.js";

// The OpenAPI document promises every status and problem code a route answers with. This file
// drives each route through its success and failure paths, records what the app really
// answered (method, route pattern, status, problem code and type) and checks each answer
// against the document the app generates from its routes: an answer the route's description
// lacks fails here, as does a route that is served but not described, or not driven at all.

const { app, database, deps } = await ingestApp(t);
await deadLetterResponder(t, deps);
await cancelResponder(t, deps);
const doc = (await (await app.request("/api/v1/openapi.json")).json()) as {
  paths: Record<string, Record<string, { responses: Record<string, Response> }>>;
};
interface Response {
  content?: Record<string, { schema?: { allOf?: Array<{ properties?: { code?: { enum?: string[] } } }> } }>;
}

/** Every route under /api/v1 the app serves, in OpenAPI spelling, with a matcher for its paths. */
const served = [
  ...new Set(
    app.routes
      .filter((r) => r.method !== "ALL" && r.path.startsWith("/api/v1/"))
      .map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, "{$1}")}`),
  ),
].map((route) => {
  const [method, pattern] = route.split(" ") as [string, string];
  const segments = pattern.split("/");
  return {
    method,
    pattern,
    // A literal segment beats a parameter (/inbox/stream is not /inbox/{itemId}), as in the router.
    literals: segments.filter((s) => !s.startsWith("{")).length,
    regex: new RegExp(`^${segments.map((s) => (s.startsWith("{") ? "[^/]+" : s.replace(/\./g, "\\."))).join("/")}$`),
  };
});

function routeOf(method: string, path: string): string {
  const matches = served.filter((r) => r.method === method && r.regex.test(path));
  matches.sort((a, b) => b.literals - a.literals);
  const route = matches[0];
  if (!route) throw new Error(`no route serves ${method} ${path}`);
  return `${method} ${route.pattern}`;
}

interface Answer {
  route: string;
  status: number;
  code: string | null;
  type: string | null;
}
const answers: Answer[] = [];

type Call = { key?: string | null; headers?: Record<string, string>; body?: string; contentType?: string };
const json = (value: unknown) => JSON.stringify(value);

/** One request to an app, recorded; answers the parsed JSON body (null for other bodies). */
async function call(method: string, path: string, options: Call = {}, target = app) {
  const { key = adminKey, body, contentType = "application/json" } = options;
  const response = await target.request(`/api/v1${path}`, {
    method,
    headers: {
      ...(key ? { "x-api-key": key } : {}),
      ...(body === undefined ? {} : { "content-type": contentType }),
      ...options.headers,
    },
    ...(body === undefined ? {} : { body }),
  });
  const type = response.headers.get("content-type") ?? "";
  const parsed = type.includes("json") ? ((await response.json()) as Record<string, unknown>) : null;
  if (parsed === null) await response.body?.cancel();
  const url = new URL(`http://x/api/v1${path}`);
  answers.push({
    route: routeOf(method, url.pathname),
    status: response.status,
    code: type.startsWith("application/problem+json") ? String(parsed?.code) : null,
    type: type.startsWith("application/problem+json") ? String(parsed?.type) : null,
  });
  return { status: response.status, body: parsed };
}

const adminKey = await seedApiKey(database, { clientId: "shop", name: "admin", scopes: ["operator"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest"] });
const readKey = await seedApiKey(database, { clientId: "shop", name: "read", scopes: ["read"] });
const prefsKey = await seedApiKey(database, { clientId: "shop", name: "prefs", scopes: ["preferences", "contacts"] });
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi <%= it.name %>", body: "Hello <%= it.name %>" }],
});
const user = `user-${randomUUID().slice(0, 8)}`;
const missing = randomUUID();
const tooLarge = json({ name: "x".repeat(deps.maxBodyBytes + 1) });
const notification = {
  user_id: user,
  category: "orders",
  template_id: "welcome",
  data: { name: "Ada" },
  priority: "transactional",
};

/**
 * The failures every authenticated route shares: no key, an unknown key, a key without the
 * scope, a NUL in the URL (paths with a parameter only, where it reaches the handler).
 */
async function securityCases(method: string, path: string, wrongScopeKey: string) {
  await call(method, path, { key: null });
  await call(method, path, { key: "nk_live_not-a-key" });
  await call(method, path, { key: wrongScopeKey });
  await call(method, `${path}${path.includes("?") ? "&" : "?"}x=%00`);
}

/** Body failures of a JSON route: malformed, invalid, another media type, too large. */
async function bodyCases(method: string, path: string, key: string, headers: Record<string, string> = {}) {
  await call(method, path, { key, headers, body: "{" });
  await call(method, path, { key, headers, body: json({ unexpected: [1] }) });
  await call(method, path, { key, headers, body: "name=x", contentType: "text/plain" });
  await call(method, path, { key, headers, body: tooLarge });
}

t.test("a scenario drives every route through its success and failure paths", async (t) => {
  // Notifications
  const idem = () => ({ "idempotency-key": randomUUID() });
  const sameKey = idem();
  const sent = await call("POST", "/notifications", { key: ingestKey, headers: sameKey, body: json(notification) });
  t.equal(sent.status, 202);
  await call("POST", "/notifications", { key: ingestKey, headers: sameKey, body: json(notification) });
  await call("POST", "/notifications", {
    key: ingestKey,
    headers: sameKey,
    body: json({ ...notification, category: "other" }),
  });
  // The same fresh key twice at once: one of them may find the other still in flight.
  const racing = idem();
  await Promise.all(
    [1, 2].map(() => call("POST", "/notifications", { key: ingestKey, headers: racing, body: json(notification) })),
  );
  await call("POST", "/notifications", { key: ingestKey, body: json(notification) });
  await call("POST", "/notifications", {
    key: ingestKey,
    headers: { "idempotency-key": '"' },
    body: json(notification),
  });
  await call("POST", "/notifications", {
    key: ingestKey,
    headers: idem(),
    body: json({ ...notification, template_id: "nope" }),
  });
  await call("POST", "/notifications", { key: ingestKey, headers: idem(), body: json({ ...notification, data: {} }) });
  await bodyCases("POST", "/notifications", ingestKey, idem());
  await securityCases("POST", "/notifications", readKey);
  const notificationId = String(sent.body?.notification_id);
  await call("GET", `/notifications/${notificationId}`, { key: readKey });
  await call("GET", `/notifications/${missing}`, { key: readKey });
  await securityCases("GET", `/notifications/${notificationId}`, ingestKey);
  // Not routed (no processor routes here): 409; then routed as the processor would, canceled.
  await call("POST", `/notifications/${notificationId}/cancel`, { key: ingestKey });
  await database.sql`insert into notification_channels (notification_id, channel, status)
    values (${notificationId}, 'email', 'pending') on conflict do nothing`;
  await call("POST", `/notifications/${notificationId}/cancel`, { key: ingestKey });
  await call("POST", `/notifications/${missing}/cancel`, { key: ingestKey });
  await securityCases("POST", `/notifications/${notificationId}/cancel`, readKey);

  // Lists
  await call("GET", `/users/${user}/notifications?limit=1`, { key: readKey });
  await call("GET", `/users/${user}/notifications?cursor=forged`, { key: readKey });
  await call("GET", `/users/${user}/notifications?status=nope`, { key: readKey });
  await securityCases("GET", `/users/${user}/notifications`, ingestKey);
  await call("GET", "/dead-letters");
  await call("GET", "/dead-letters?page_size=nope");
  await securityCases("GET", "/dead-letters", readKey);
  const { seq } = await deps.bus.publish(
    deps.bus.subjects.dlq("email"),
    deadLetterOf({ notification_id: notificationId, user_id: user }),
    `dl-${randomUUID()}`,
  );
  await call("GET", `/dead-letters/${seq}`);
  await call("GET", "/dead-letters/999999");
  await call("GET", "/dead-letters/nope");
  await securityCases("GET", `/dead-letters/${seq}`, readKey);
  await call("POST", "/dead-letters/replay", { body: json({ all: true, dry_run: true }) });
  await call("POST", "/dead-letters/replay", { body: json({ dry_run: true }) });
  await bodyCases("POST", "/dead-letters/replay", adminKey);
  await securityCases("POST", "/dead-letters/replay", readKey);

  // API keys
  const issued = await call("POST", "/keys", { body: json({ client_id: "shop", name: "k", scopes: ["read"] }) });
  t.equal(issued.status, 201);
  const keyId = String(issued.body?.id);
  await bodyCases("POST", "/keys", adminKey);
  await securityCases("POST", "/keys", readKey);
  await call("GET", "/keys?page=1");
  await call("GET", "/keys?page=nope");
  await securityCases("GET", "/keys", readKey);
  await call("GET", `/keys/${keyId}`);
  await call("GET", `/keys/${missing}`);
  await securityCases("GET", `/keys/${keyId}`, readKey);
  await call("POST", `/keys/${keyId}/rotate`, { body: json({ grace_seconds: 60 }) });
  await call("POST", `/keys/${missing}/rotate`, { body: "{}" });
  await bodyCases("POST", `/keys/${keyId}/rotate`, adminKey);
  await securityCases("POST", `/keys/${keyId}/rotate`, readKey);
  await call("DELETE", `/keys/${keyId}`);
  await call("DELETE", `/keys/${missing}`);
  await securityCases("DELETE", `/keys/${keyId}`, readKey);

  // A key whose bucket holds one request: the second in a row is refused.
  const limited = await call("POST", "/keys", {
    body: json({ client_id: "shop", name: "slow", scopes: ["read"], rate_limit: { burst: 1, per_second: 1 } }),
  });
  const limitedKey = String(limited.body?.key);
  await call("GET", `/notifications/${notificationId}`, { key: limitedKey });
  await call("GET", `/notifications/${notificationId}`, { key: limitedKey });

  // Preferences and contacts
  for (const resource of ["preferences", "contacts"]) {
    const path = `/users/${user}/${resource}`;
    await call("GET", path, { key: prefsKey });
    await call("GET", `/users/${"x".repeat(300)}/${resource}`, { key: prefsKey });
    await securityCases("GET", path, readKey);
    const body = resource === "preferences" ? { channel_optout: ["sms"], locale: "en" } : { email: "ada@example.com" };
    await call("PUT", path, { key: prefsKey, body: json(body) });
    await call("PUT", path, { key: prefsKey, body: json({ ...body, user_id: "someone-else" }) });
    await bodyCases("PUT", path, prefsKey);
    await securityCases("PUT", path, readKey);
  }

  // Templates
  const template = {
    params: ["name"],
    variants: [{ channel: "email", locale: "en", subject: "Hey <%= it.name %>", body_template: "v2 <%= it.name %>" }],
  };
  await call("PUT", "/templates/welcome", { body: json(template) });
  await call("PUT", "/templates/welcome", { body: json(template) });
  await call("PUT", "/templates/welcome", { body: json({ ...template, template_id: "other" }) });
  await bodyCases("PUT", "/templates/welcome", adminKey);
  await securityCases("PUT", "/templates/welcome", readKey);
  await call("GET", "/templates");
  await call("GET", "/templates?page_size=nope");
  await securityCases("GET", "/templates", readKey);
  await call("GET", "/templates/welcome");
  await call("GET", `/templates/${missing}`);
  await call("GET", `/templates/${"x".repeat(300)}`);
  await securityCases("GET", "/templates/welcome", readKey);
  await call("GET", "/templates/welcome/versions/1");
  await call("GET", "/templates/welcome/versions/99");
  await call("GET", "/templates/welcome/versions/nope");
  await securityCases("GET", "/templates/welcome/versions/1", readKey);

  // Inbox: tokens by API key, the rest by inbox token
  const tokenAnswer = await call("POST", `/users/${user}/inbox-tokens`, { key: inboxKey, body: "{}" });
  t.equal(tokenAnswer.status, 201);
  await call("POST", `/users/${user}/inbox-tokens`, { key: inboxKey, body: json({ ttl_seconds: 1 }) });
  await bodyCases("POST", `/users/${user}/inbox-tokens`, inboxKey);
  await securityCases("POST", `/users/${user}/inbox-tokens`, readKey);
  const inbox = { "x-inbox-token": String(tokenAnswer.body?.token) };
  const item = await storeInboxItem(database.sql, {
    userId: user,
    notificationId: notificationId,
    category: "orders",
    title: "Hi",
    body: "Hello",
  });
  await call("GET", "/inbox", { key: null, headers: inbox });
  await call("GET", "/inbox?cursor=forged", { key: null, headers: inbox });
  await call("GET", "/inbox?filter=nope", { key: null, headers: inbox });
  await call("GET", "/inbox", { key: null });
  await call("GET", "/inbox", { key: adminKey });
  await call("GET", `/inbox?token=${inbox["x-inbox-token"]}`, { key: null });
  await call("GET", "/inbox", { key: null, headers: { "x-inbox-token": "forged" } });
  await call("PATCH", `/inbox/${item}`, { key: null, headers: inbox, body: json({ read: true }) });
  await call("PATCH", "/inbox/99999999", { key: null, headers: inbox, body: json({ read: true }) });
  await call("PATCH", `/inbox/${item}`, { key: null, body: json({ read: true }) });
  await bodyCases("PATCH", `/inbox/${item}`, "", inbox);
  await call("GET", "/inbox/stream", { key: null, headers: inbox });
  await call("GET", "/inbox/stream", { key: null, headers: { ...inbox, "last-event-id": "nope" } });
  await call("GET", "/inbox/stream", { key: null });
  await call("GET", "/inbox/counts", { key: null, headers: inbox });
  await call("GET", "/inbox/counts", { key: null });
  await call("GET", "/inbox/counts", { key: adminKey });
  await call("POST", "/inbox/mark-all", { key: null, headers: inbox, body: json({ action: "seen", before_id: "1" }) });
  await call("POST", "/inbox/mark-all", { key: null, headers: inbox, body: json({ action: "read" }) });
  await call("POST", "/inbox/mark-all", { key: null, body: json({ action: "read" }) });
  await bodyCases("POST", "/inbox/mark-all", "", inbox);
  await call("GET", "/inbox/preferences", { key: null, headers: inbox });
  await call("GET", "/inbox/preferences", { key: null });
  await call("PATCH", "/inbox/preferences", { key: null, headers: inbox, body: json({ channel_optout: ["sms"] }) });
  await call("PATCH", "/inbox/preferences", { key: null, headers: inbox, body: json({ time_zone: "Mars/Olympus" }) });
  await call("PATCH", "/inbox/preferences", { key: null, body: json({ locale: "en" }) });
  await bodyCases("PATCH", "/inbox/preferences", "", inbox);
  await call("DELETE", `/users/${user}/inbox-tokens/${String(tokenAnswer.body?.token_id)}`, { key: inboxKey });
  await call("DELETE", `/users/${user}/inbox-tokens/not-a-token-id`, { key: inboxKey });
  await call("DELETE", `/users/${"x".repeat(300)}/inbox-tokens/${missing}`, { key: inboxKey });
  await securityCases("DELETE", `/users/${user}/inbox-tokens/${missing}`, readKey);
  await call("DELETE", `/users/${user}/inbox-tokens`, { key: inboxKey });
  await call("DELETE", `/users/${"x".repeat(300)}/inbox-tokens`, { key: inboxKey });
  await securityCases("DELETE", `/users/${user}/inbox-tokens`, readKey);
  await call("GET", "/inbox", { key: null, headers: inbox });

  // Audiences and broadcasts
  const audience = await call("POST", "/audiences", { body: json({ name: "all" }) });
  t.equal(audience.status, 201);
  const audienceId = String(audience.body?.id);
  await bodyCases("POST", "/audiences", adminKey);
  await securityCases("POST", "/audiences", readKey);
  await call("GET", "/audiences");
  await call("GET", "/audiences?page=nope");
  await securityCases("GET", "/audiences", readKey);
  await call("GET", `/audiences/${audienceId}`);
  await call("GET", `/audiences/${missing}`);
  await securityCases("GET", `/audiences/${audienceId}`, readKey);
  const ndjson = "application/x-ndjson";
  const importPath = `/audiences/${audienceId}/members/import`;
  await call("POST", importPath, { body: `"${user}"\n"bo"\n`, contentType: ndjson });
  await call("POST", importPath, { body: "{bad\n", contentType: ndjson });
  await call("POST", importPath, { body: "a,b", contentType: "text/plain" });
  await call("POST", `/audiences/${missing}/members/import`, { body: `"${user}"\n`, contentType: ndjson });
  await securityCases("POST", importPath, readKey);
  const memberPath = `/audiences/${audienceId}/members/${user}`;
  for (const method of ["PUT", "DELETE"]) {
    await call(method, memberPath);
    await call(method, `/audiences/${missing}/members/${user}`);
    await call(method, `/audiences/${audienceId}/members/${"x".repeat(300)}`);
    await securityCases(method, memberPath, readKey);
  }
  const broadcast = { audience_id: audienceId, category: "news", template_id: "welcome", data: { name: "Ada" } };
  const bKey = idem();
  const accepted = await call("POST", "/broadcasts", { headers: bKey, body: json(broadcast) });
  t.equal(accepted.status, 202);
  await call("POST", "/broadcasts", { headers: bKey, body: json(broadcast) });
  await call("POST", "/broadcasts", { headers: bKey, body: json({ ...broadcast, category: "other" }) });
  await call("POST", "/broadcasts", { body: json(broadcast) });
  await call("POST", "/broadcasts", { headers: { "idempotency-key": '"' }, body: json(broadcast) });
  await call("POST", "/broadcasts", { headers: idem(), body: json({ ...broadcast, template_id: "nope" }) });
  await call("POST", "/broadcasts", { headers: idem(), body: json({ ...broadcast, data: {} }) });
  await bodyCases("POST", "/broadcasts", adminKey, idem());
  await securityCases("POST", "/broadcasts", readKey);
  const broadcastId = String(accepted.body?.broadcast_id);
  await call("GET", `/broadcasts/${broadcastId}`);
  await call("GET", `/broadcasts/${missing}`);
  await securityCases("GET", `/broadcasts/${broadcastId}`, readKey);
  for (const action of ["pause", "resume"]) {
    await call("POST", `/broadcasts/${broadcastId}/${action}`);
    await call("POST", `/broadcasts/${missing}/${action}`);
    await securityCases("POST", `/broadcasts/${broadcastId}/${action}`, readKey);
  }

  // The operator's routes
  await call("GET", `/ops/notifications?user_id=${user}`);
  await call("GET", "/ops/notifications");
  await call("GET", `/ops/notifications?idempotency_key=${randomUUID()}`);
  await securityCases("GET", `/ops/notifications?user_id=${user}`, readKey);
  await call("GET", `/ops/notifications/${notificationId}`);
  await call("GET", "/ops/users/user-1/contact-changes");
  await call("GET", `/ops/users/${"x".repeat(300)}/contact-changes`);
  await call("GET", `/ops/notifications/${missing}`);
  await securityCases("GET", `/ops/notifications/${notificationId}`, readKey);
  await call("GET", "/ops/streams");
  await securityCases("GET", "/ops/streams", readKey);
  await call("GET", "/ops/providers");
  await securityCases("GET", "/ops/providers", readKey);
  await call("GET", "/ops/broadcasts");
  await call("GET", "/ops/broadcasts?status=nope");
  await securityCases("GET", "/ops/broadcasts", readKey);
  for (const action of ["pause", "resume", "cancel"]) {
    await call("POST", `/ops/broadcasts/${broadcastId}/${action}`);
    await call("POST", `/ops/broadcasts/${missing}/${action}`);
    await securityCases("POST", `/ops/broadcasts/${broadcastId}/${action}`, readKey);
  }

  await call("POST", `/broadcasts/${broadcastId}/cancel`);
  await call("POST", `/broadcasts/${missing}/cancel`);
  await securityCases("POST", `/broadcasts/${broadcastId}/cancel`, readKey);

  // Webhook endpoints
  const hook = await call("POST", "/webhook-endpoints", { body: json({ url: "https://hooks.example.com/x" }) });
  t.equal(hook.status, 201);
  const hookId = String(hook.body?.id);
  await call("POST", "/webhook-endpoints", { body: json({ url: "https://127.0.0.1/x" }) });
  await bodyCases("POST", "/webhook-endpoints", adminKey);
  await securityCases("POST", "/webhook-endpoints", readKey);
  await call("GET", "/webhook-endpoints");
  await securityCases("GET", "/webhook-endpoints", readKey);
  for (const path of [
    `/webhook-endpoints/${hookId}`,
    `/webhook-endpoints/${hookId}/attempts`,
    `/webhook-endpoints/${hookId}/dead-letters`,
  ]) {
    await call("GET", path);
    await call("GET", path.replace(hookId, "whe_missing"));
    await securityCases("GET", path, readKey);
  }
  await call("GET", `/webhook-endpoints/${hookId}/attempts?limit=0`);
  await call("GET", `/webhook-endpoints/${hookId}/dead-letters?limit=x`);
  await call("PATCH", `/webhook-endpoints/${hookId}`, { body: json({ description: "hooks" }) });
  await call("PATCH", "/webhook-endpoints/whe_missing", { body: json({ description: "hooks" }) });
  await bodyCases("PATCH", `/webhook-endpoints/${hookId}`, adminKey);
  await securityCases("PATCH", `/webhook-endpoints/${hookId}`, readKey);
  await call("POST", `/webhook-endpoints/${hookId}/rotate-secret`);
  await call("POST", "/webhook-endpoints/whe_missing/rotate-secret");
  await bodyCases("POST", `/webhook-endpoints/${hookId}/rotate-secret`, adminKey);
  await securityCases("POST", `/webhook-endpoints/${hookId}/rotate-secret`, readKey);
  const since = new Date(Date.now() - 3_600_000).toISOString();
  await call("POST", `/webhook-endpoints/${hookId}/replay`, { body: json({ since }) });
  await call("POST", "/webhook-endpoints/whe_missing/replay", { body: json({ since }) });
  await bodyCases("POST", `/webhook-endpoints/${hookId}/replay`, adminKey);
  await securityCases("POST", `/webhook-endpoints/${hookId}/replay`, readKey);
  await call("POST", `/webhook-endpoints/${hookId}/test`);
  await call("POST", "/webhook-endpoints/whe_missing/test");
  await securityCases("POST", `/webhook-endpoints/${hookId}/test`, readKey);
  await call("GET", "/ops/webhook-endpoints");
  await securityCases("GET", "/ops/webhook-endpoints", readKey);
  await call("GET", `/ops/webhook-endpoints/${hookId}/dead-letters`);
  await call("GET", "/ops/webhook-endpoints/whe_missing/dead-letters");
  await call("GET", `/ops/webhook-endpoints/${hookId}/dead-letters?limit=0`);
  await securityCases("GET", `/ops/webhook-endpoints/${hookId}/dead-letters`, readKey);
  await call("POST", `/ops/webhook-endpoints/${hookId}/replay`, { body: json({ event_ids: ["evt_1"] }) });
  await call("POST", "/ops/webhook-endpoints/whe_missing/replay", { body: json({ event_ids: ["evt_1"] }) });
  await bodyCases("POST", `/ops/webhook-endpoints/${hookId}/replay`, adminKey);
  await securityCases("POST", `/ops/webhook-endpoints/${hookId}/replay`, readKey);
  await call("DELETE", `/webhook-endpoints/${hookId}`);
  await call("DELETE", `/webhook-endpoints/${hookId}`);
  await securityCases("DELETE", `/webhook-endpoints/${hookId}`, readKey);

  // Suppressions
  const suppressed = "/suppressions/email/ada%40example.com";
  await call("PUT", suppressed, { key: prefsKey, body: json({ reason: "unsubscribe" }) });
  await call("PUT", suppressed, { key: prefsKey, body: json({}) });
  await call("PUT", suppressed, { key: prefsKey, body: json({ scope: "all_clients" }) });
  await call("PUT", "/suppressions/email/not-an-address", { key: prefsKey, body: json({}) });
  await call("PUT", "/suppressions/push/x", { key: prefsKey, body: json({}) });
  await bodyCases("PUT", suppressed, prefsKey);
  await securityCases("PUT", suppressed, readKey);
  await call("GET", "/suppressions", { key: prefsKey });
  await call("GET", "/suppressions?client=*");
  await call("GET", "/suppressions?client=*", { key: prefsKey });
  await call("GET", "/suppressions?limit=0", { key: prefsKey });
  await call("GET", "/suppressions?cursor=x", { key: prefsKey });
  await securityCases("GET", "/suppressions", readKey);
  await call("GET", suppressed, { key: prefsKey });
  await call("GET", "/suppressions/email/nobody%40example.com", { key: prefsKey });
  await call("GET", "/suppressions/sms/12", { key: prefsKey });
  await securityCases("GET", suppressed, readKey);
  await call("DELETE", `${suppressed}?scope=all_clients`, { key: prefsKey });
  await call("DELETE", `${suppressed}?scope=x`, { key: prefsKey });
  await call("DELETE", "/suppressions/sms/12", { key: prefsKey });
  await call("DELETE", suppressed, { key: prefsKey });
  await call("DELETE", suppressed, { key: prefsKey });
  await securityCases("DELETE", suppressed, readKey);

  // The document itself
  await call("GET", "/openapi.json", { key: null });
  await call("GET", "/docs", { key: null });

  // NATS gone: the routes that need it answer 503.
  const closed = await connectBus({
    servers: TEST_NATS_URL,
    name: "closed",
    namespace: freshNamespace(t),
    partitions: 2,
  });
  await closed.close();
  const { app: cut } = await ingestApp(t, { database, bus: closed });
  await call("GET", "/dead-letters", {}, cut);
  await call("GET", `/dead-letters/${seq}`, {}, cut);
  await call("POST", "/dead-letters/replay", { body: json({ all: true, dry_run: true }) }, cut);
  await call("POST", `/notifications/${missing}/cancel`, { key: ingestKey }, cut);
  await call("GET", "/ops/streams", {}, cut);
  await call("GET", "/ops/providers", {}, cut);
  await call("POST", "/notifications", { key: ingestKey, headers: idem(), body: json(notification) }, cut);

  // After the version's sunset every route answers 410.
  const { app: sunset } = await ingestApp(t, { database, bus: deps.bus, lifecycle: { sunsetAt: new Date(0) } });
  for (const route of served) await call(route.method, route.pattern.slice("/api/v1".length), {}, sunset);
});

const statuses = (route: string) => new Set(answers.filter((a) => a.route === route).map((a) => a.status));

t.test("the scenario reached each kind of answer", async (t) => {
  const seen = new Set(answers.map((a) => a.status));
  for (const status of [200, 201, 202, 204, 400, 401, 403, 404, 410, 413, 415, 422, 429, 503]) {
    t.ok(seen.has(status), `some route answered ${status}`);
  }
  for (const route of served) {
    const key = `${route.method} ${route.pattern}`;
    t.ok(
      [...statuses(key)].some((s) => s < 300),
      `${key} succeeded at least once`,
    );
  }
});

t.test("every route served is described, and every route was driven", async (t) => {
  for (const route of served) {
    t.ok(doc.paths[route.pattern]?.[route.method.toLowerCase()], `${route.method} ${route.pattern} is in the document`);
    t.ok(statuses(`${route.method} ${route.pattern}`).size > 0, `${route.method} ${route.pattern} was driven`);
  }
});

t.test("every answer is one its route's description lists", async (t) => {
  const seen = new Set<string>();
  for (const answer of answers) {
    const label = `${answer.route} ${answer.status}${answer.code ? ` ${answer.code}` : ""}`;
    if (seen.has(label)) continue;
    seen.add(label);
    const [method, pattern] = answer.route.split(" ") as [string, string];
    const response = doc.paths[pattern]?.[method.toLowerCase()]?.responses[String(answer.status)];
    t.ok(response, `${label}: the status is documented`);
    if (answer.code === null) continue;
    t.equal(answer.type, `${PROBLEM_TYPE_BASE}${answer.code}`, `${label}: the problem type names its code`);
    const codes = response?.content?.["application/problem+json"]?.schema?.allOf?.[1]?.properties?.code?.enum ?? [];
    t.ok(codes.includes(answer.code), `${label}: the problem code is documented`);
  }
});
