import { randomUUID } from "node:crypto";
import { applyTopology } from "@notify/bus";
import { newId, signUnsubscribeToken } from "@notify/core";
import { loadUnsubscribeKey, seedApiKey, seedTemplate, storeInboxItem } from "@notify/db";
import {
  captureLogger,
  deadLetterOf,
  eventually,
  freshDatabase,
  freshNamespace,
  proxiedDependencies,
  whileCut,
} from "@notify/testing";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { createIngestor } from "../src/notifications/create.js";
import { createTemplateLookup } from "../src/notifications/templates.js";
import { cancelResponder, deadLetterResponder, ingestApp } from "./support.js";

// "A transient database or NATS error on any route answers 503 problem+json with Retry-After,
// never 500." The app reaches the real Postgres and NATS through proxies this file cuts. Every
// route the app serves is called (enumerated from app.routes, so a new route is called too,
// and fails here until it has a well-formed request below): first with both servers up, where
// each request must succeed (so it is well-formed and really reaches its dependency), then with
// Postgres cut, then with NATS cut.

const { url, database } = await freshDatabase(t);
const {
  database: proxiedDatabase,
  bus,
  postgres: pgProxy,
  nats: natsProxy,
} = await proxiedDependencies(t, {
  url,
  namespace: freshNamespace(t),
  partitions: 2,
  poolSize: 4,
  publishTimeoutMs: 1000,
});
await applyTopology(bus);

// The key and template caches are warm, as in production (AUTH_CACHE_TTL_SECONDS, the 5 s
// template cache): the fixtures below use both before each cut, so authentication and the
// template check answer from memory and each route's own work meets the outage.
const { log } = captureLogger("ingest");
const templates = createTemplateLookup(proxiedDatabase, 600_000);
const ingestor = createIngestor({ database: proxiedDatabase, bus, log, templates });
const { app, admin } = await ingestApp(t, {
  database: proxiedDatabase,
  bus,
  log,
  lookupKey: createKeyLookup(proxiedDatabase, 600_000),
  templates,
  ingestor,
});
// The processor's answers to the dead-letter routes, on the same cut dependencies.
await deadLetterResponder(t, { database: proxiedDatabase, bus, log });
// And to the cancel.
await cancelResponder(t, { database: proxiedDatabase, bus, log });
const adminKey = await seedApiKey(database, { clientId: "shop", name: "admin", scopes: ["operator"] });
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi <%= it.name %>", body: "Hello <%= it.name %>" }],
});

type Call = { method: string; headers?: Record<string, string>; body?: string };
const json = (value: unknown) => JSON.stringify(value);

const request = async (path: string, call: Call = { method: "GET" }) => {
  const response = await app.request(path, {
    method: call.method,
    headers: {
      "x-api-key": adminKey,
      ...(call.body === undefined ? {} : { "content-type": "application/json" }),
      ...call.headers,
    },
    ...(call.body === undefined ? {} : { body: call.body }),
  });
  return response;
};
const created = async <T>(path: string, call: Call): Promise<T> => {
  const response = await request(`/api/v1${path}`, call);
  if (response.status >= 300) throw new Error(`${call.method} ${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
};

/** Fresh things for the routes to work on, made while both servers are up. */
async function fixtures() {
  const user = `user-${randomUUID().slice(0, 8)}`;
  const keyToRead = await created<{ id: string }>("/keys", {
    method: "POST",
    body: json({ client_id: "shop", name: "target", scopes: ["read"] }),
  });
  const keyToRevoke = await created<{ id: string }>("/keys", {
    method: "POST",
    body: json({ client_id: "shop", name: "doomed", scopes: ["read"] }),
  });
  const audience = await created<{ id: string }>("/audiences", { method: "POST", body: json({ name: "all" }) });
  const emptyAudience = await created<{ id: string }>("/audiences", { method: "POST", body: json({ name: "none" }) });
  const broadcast = await created<{ broadcast_id: string }>("/broadcasts", {
    method: "POST",
    headers: { "idempotency-key": randomUUID() },
    body: json({ audience_id: emptyAudience.id, category: "news", template_id: "welcome", data: { name: "Ada" } }),
  });
  const notification = await created<{ notification_id: string }>("/notifications", {
    method: "POST",
    headers: { "idempotency-key": randomUUID() },
    body: json({
      user_id: user,
      category: "orders",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
    }),
  });
  // One to cancel, routed as the processor would leave it (no processor runs here).
  const toCancel = await created<{ notification_id: string }>("/notifications", {
    method: "POST",
    headers: { "idempotency-key": randomUUID() },
    body: json({
      user_id: user,
      category: "orders",
      template_id: "welcome",
      data: { name: "Cy" },
      priority: "transactional",
    }),
  });
  await database.sql`insert into notification_channels (notification_id, channel, status)
    values (${toCancel.notification_id}, 'email', 'pending')`;
  const token = await created<{ token: string }>(`/users/${user}/inbox-tokens`, { method: "POST", body: "{}" });
  const item = await storeInboxItem(database.sql, {
    userId: user,
    notificationId: notification.notification_id,
    category: "orders",
    title: "Hi",
    body: "Hello",
  });
  // A dead letter of the notification, for the dead-letter routes (each reads its channel's state in Postgres).
  const { seq } = await bus.publish(
    bus.subjects.dlq("email"),
    deadLetterOf({ notification_id: notification.notification_id, user_id: user }),
    `dl-${randomUUID()}`,
  );
  const hook = await created<{ id: string }>("/webhook-endpoints", {
    method: "POST",
    body: json({ url: "https://hooks.example.com/outage" }),
  });
  const hookToDelete = await created<{ id: string }>("/webhook-endpoints", {
    method: "POST",
    body: json({ url: "https://hooks.example.com/doomed" }),
  });
  // Entries to read and to remove: requests made at once must not meet on one entry.
  const suppressed = `${randomUUID()}@example.com`;
  const suppressedToLift = `${randomUUID()}@example.com`;
  for (const address of [suppressed, suppressedToLift]) {
    await created(`/suppressions/email/${encodeURIComponent(address)}`, { method: "PUT", body: "{}" });
  }
  // A link from an email, for the unsubscribe routes.
  const unsubscribe = signUnsubscribeToken(await loadUnsubscribeKey(database), {
    clientId: "shop",
    userId: user,
    category: "news",
  });
  return {
    user,
    unsubscribe,
    keyToRead,
    keyToRevoke,
    audience,
    broadcast,
    notification,
    toCancel,
    token: token.token,
    item,
    seq,
    hook,
    hookToDelete,
    suppressed,
    suppressedToLift,
  };
}
type Fixtures = Awaited<ReturnType<typeof fixtures>>;

/** Path parameters by route: a route not named here gets a fresh UUID for each parameter. */
function pathOf(route: string, f: Fixtures): string {
  const values: Record<string, Record<string, string>> = {
    "/api/v1/notifications/:id": { id: f.notification.notification_id },
    "/api/v1/notifications/:id/cancel": { id: f.toCancel.notification_id },
    "/u/:token": { token: f.unsubscribe },
    "/api/v1/keys/:id": { id: f.keyToRead.id },
    "/api/v1/keys/:id/rotate": { id: f.keyToRead.id },
    "DELETE /api/v1/keys/:id": { id: f.keyToRevoke.id },
    "/api/v1/users/:id/preferences": { id: f.user },
    "/api/v1/users/:id/contacts": { id: f.user },
    "/api/v1/users/:id/notifications": { id: f.user },
    "/api/v1/users/:id/inbox-tokens": { id: f.user },
    // A token id a working token can have (a UUIDv7 of now): any other is answered without Postgres.
    "/api/v1/users/:id/inbox-tokens/:tokenId": { id: f.user, tokenId: newId() },
    "/api/v1/templates/:id": { id: "welcome" },
    "/api/v1/templates/:id/versions/:version": { id: "welcome", version: "1" },
    "/api/v1/inbox/:itemId": { itemId: String(f.item) },
    "/api/v1/audiences/:id": { id: f.audience.id },
    "/api/v1/audiences/:id/members/import": { id: f.audience.id },
    "/api/v1/audiences/:id/members/:userId": { id: f.audience.id, userId: f.user },
    "/api/v1/broadcasts/:id": { id: f.broadcast.broadcast_id },
    "/api/v1/broadcasts/:id/cancel": { id: f.broadcast.broadcast_id },
    "/api/v1/broadcasts/:id/pause": { id: f.broadcast.broadcast_id },
    "/api/v1/broadcasts/:id/resume": { id: f.broadcast.broadcast_id },
    "/api/v1/ops/notifications/:id": { id: f.notification.notification_id },
    "/api/v1/ops/broadcasts/:id/pause": { id: f.broadcast.broadcast_id },
    "/api/v1/ops/broadcasts/:id/resume": { id: f.broadcast.broadcast_id },
    "/api/v1/ops/broadcasts/:id/cancel": { id: f.broadcast.broadcast_id },
    "/api/v1/dead-letters/:seq": { seq: String(f.seq) },
    "/api/v1/webhook-endpoints/:id": { id: f.hook.id },
    "DELETE /api/v1/webhook-endpoints/:id": { id: f.hookToDelete.id },
    "/api/v1/webhook-endpoints/:id/rotate-secret": { id: f.hook.id },
    "/api/v1/webhook-endpoints/:id/attempts": { id: f.hook.id },
    "/api/v1/webhook-endpoints/:id/dead-letters": { id: f.hook.id },
    "/api/v1/webhook-endpoints/:id/replay": { id: f.hook.id },
    "/api/v1/webhook-endpoints/:id/test": { id: f.hook.id },
    "/api/v1/ops/webhook-endpoints/:id/dead-letters": { id: f.hook.id },
    "/api/v1/ops/webhook-endpoints/:id/replay": { id: f.hook.id },
    "/api/v1/suppressions/:channel/:address": { channel: "email", address: f.suppressed },
    "PUT /api/v1/suppressions/:channel/:address": { channel: "email", address: `${randomUUID()}@example.com` },
    "DELETE /api/v1/suppressions/:channel/:address": { channel: "email", address: f.suppressedToLift },
  };
  /** A query a route needs to be well-formed. */
  const queries: Record<string, string> = { "GET /api/v1/ops/notifications": `?user_id=${f.user}` };
  const path = route.split(" ")[1] as string;
  const params = values[route] ?? values[path] ?? {};
  return (
    path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name] ?? randomUUID())) +
    (queries[route] ?? "")
  );
}

/** What each route is sent besides its path; a route not named here is sent nothing more. */
function callOf(route: string, f: Fixtures): Call {
  const inbox = { "x-inbox-token": f.token };
  const method = route.split(" ")[0] as string;
  const calls: Record<string, Omit<Call, "method">> = {
    "POST /api/v1/notifications": {
      headers: { "idempotency-key": randomUUID() },
      body: json({
        user_id: f.user,
        category: "orders",
        template_id: "welcome",
        data: { name: "Bo" },
        priority: "transactional",
      }),
    },
    "POST /api/v1/keys": { body: json({ client_id: "shop", name: "new", scopes: ["read"] }) },
    "POST /api/v1/keys/:id/rotate": { body: json({ grace_seconds: 60 }) },
    "PUT /api/v1/users/:id/preferences": { body: json({ channel_optout: ["sms"], locale: "en" }) },
    "PUT /api/v1/users/:id/contacts": { body: json({ email: "ada@example.com" }) },
    "PUT /api/v1/templates/:id": {
      body: json({
        params: ["name"],
        variants: [
          { channel: "email", locale: "en", subject: "Hey <%= it.name %>", body_template: `v${randomUUID()}` },
        ],
      }),
    },
    "POST /api/v1/users/:id/inbox-tokens": { body: json({ ttl_seconds: 600 }) },
    "GET /api/v1/inbox": { headers: inbox },
    "GET /api/v1/inbox/stream": { headers: inbox },
    "PATCH /api/v1/inbox/:itemId": { headers: inbox, body: json({ read: true }) },
    "GET /api/v1/inbox/counts": { headers: inbox },
    "POST /api/v1/inbox/mark-all": { headers: inbox, body: json({ action: "seen" }) },
    "GET /api/v1/inbox/preferences": { headers: inbox },
    "PATCH /api/v1/inbox/preferences": { headers: inbox, body: json({ locale: "en", time_zone: "Europe/London" }) },
    "POST /api/v1/audiences": { body: json({ name: "more" }) },
    "POST /api/v1/audiences/:id/members/import": {
      headers: { "content-type": "application/x-ndjson" },
      body: `"${f.user}"\n"someone-else"\n`,
    },
    "POST /api/v1/dead-letters/replay": { body: json({ all: true, dry_run: true }) },
    "POST /api/v1/webhook-endpoints": { body: json({ url: "https://hooks.example.com/new" }) },
    "PATCH /api/v1/webhook-endpoints/:id": { body: json({ description: "outage" }) },
    "POST /api/v1/webhook-endpoints/:id/replay": { body: json({ since: new Date(Date.now() - 60_000).toISOString() }) },
    "POST /api/v1/ops/webhook-endpoints/:id/replay": { body: json({ event_ids: ["evt_1"] }) },
    "POST /api/v1/broadcasts": {
      headers: { "idempotency-key": randomUUID() },
      body: json({ audience_id: f.audience.id, category: "news", template_id: "welcome", data: { name: "Ada" } }),
    },
  };
  return { method, ...calls[route] };
}

/** Every route the app serves, as "METHOD /path" in Hono's spelling. */
const routes = [...new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`))];

interface Answer {
  route: string;
  status: number;
  type: string | null;
  retryAfter: string | null;
  body: Record<string, unknown> | null;
}
/** All at once, as traffic would come: during an outage they share the client's reconnect attempts. */
async function callEvery(f: Fixtures): Promise<Answer[]> {
  return Promise.all(
    routes.map(async (route) => {
      const response = await request(pathOf(route, f), callOf(route, f));
      const type = response.headers.get("content-type");
      // An event stream that opened never ends on its own: it is closed unread.
      const body = type?.includes("json") ? ((await response.json()) as Record<string, unknown>) : null;
      if (body === null) await response.body?.cancel();
      return { route, status: response.status, type, retryAfter: response.headers.get("retry-after"), body };
    }),
  );
}

const isOutageAnswer = (a: Answer) =>
  a.status === 503 &&
  a.type === "application/problem+json" &&
  a.body?.code === "dependency_unavailable" &&
  a.body?.detail === "Service temporarily unavailable" &&
  /^\d+$/.test(a.retryAfter ?? "");
const describe = (a: Answer) => `${a.route}: ${a.status} ${a.type} ${JSON.stringify(a.body)}`;

/** Routes that never need Postgres, and what they answer without it. */
const WITHOUT_POSTGRES: Record<string, number> = {
  "GET /healthz": 200,
  // The link's MAC key is read once; the confirmation page writes nothing.
  "GET /u/:token": 200,
  // A signed token is minted with the deployment's MAC key, read once: nothing is stored.
  "POST /api/v1/users/:id/inbox-tokens": 201,
  "GET /api/v1/openapi.json": 200,
  "GET /api/v1/docs": 200,
  "GET /api/v1/dead-letters": 200,
  "GET /api/v1/ops/streams": 200,
  "GET /api/v1/ops/providers": 200,
};
/** Routes that must notice NATS is gone; every other route works on without it. */
const NEEDS_NATS = [
  "POST /api/v1/notifications",
  "POST /api/v1/notifications/:id/cancel",
  "GET /api/v1/dead-letters",
  "GET /api/v1/dead-letters/:seq",
  "POST /api/v1/dead-letters/replay",
  "GET /api/v1/ops/streams",
  "GET /api/v1/ops/providers",
];

const openapi = (await (await app.request("/api/v1/openapi.json")).json()) as {
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
};
/** Whether the OpenAPI document lists a 503 for the route (only /api/v1 is documented). */
const documents503 = (route: string) => {
  const [method, path] = route.split(" ") as [string, string];
  if (!path.startsWith("/api/v1/")) return true;
  return openapi.paths[path.replace(/:(\w+)/g, "{$1}")]?.[method.toLowerCase()]?.responses["503"] !== undefined;
};

/** Readiness, on the operator's port. */
const readiness = async () => {
  const response = await admin.request("/readyz");
  return { status: response.status, body: (await response.json()) as unknown };
};

/** Runs `work` while the proxy is cut and the app's readiness shows it, then restores it. */

t.test("every route is called, and every documented operation is a route", async (t) => {
  const documented = Object.entries(openapi.paths).flatMap(([path, item]) =>
    Object.keys(item).map((method) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
  );
  t.same(
    documented.filter((r) => !routes.includes(r)),
    [],
    "no documented operation is missing from app.routes",
  );
  t.ok(routes.includes("GET /healthz"));
  t.notOk(routes.includes("GET /readyz") || routes.includes("GET /metrics"), "no operator route on the public port");
  t.match(await readiness(), { status: 200, body: { status: "ready" } });
});

t.test("with both servers up, every request here is well-formed and succeeds", async (t) => {
  const answers = await callEvery(await fixtures());
  for (const a of answers) t.ok(a.status >= 200 && a.status < 300, describe(a));
});

t.test("with Postgres cut, every route answers 503 problem+json with Retry-After, never 500", async (t) => {
  // No transaction may be open when the connection drops: postgres.js 3.4.9 then writes the
  // ROLLBACK to the dead socket from a setImmediate and the process dies of a TypeError
  // (porsager/postgres#1208, no release fixes it). The ingestor's outbox settler is the one
  // transaction that runs in the background, so it is stopped (drain) before the cut; the
  // requests below cannot open one, as no connection can be made.
  await ingestor.drain();
  const f = await fixtures();
  await whileCut(admin, pgProxy, "postgres", async () => {
    t.match(await readiness(), { status: 503, body: { status: "not_ready", checks: { postgres: false } } });
    for (const a of await callEvery(f)) {
      if (a.route in WITHOUT_POSTGRES) {
        t.equal(a.status, WITHOUT_POSTGRES[a.route], `${describe(a)}: needs no database`);
      } else {
        t.ok(isOutageAnswer(a), describe(a));
        t.ok(documents503(a.route), `${a.route} documents its 503`);
      }
    }
  });
  await eventually(
    async () => ((await request("/api/v1/keys")).status === 200 ? true : undefined),
    30_000,
    "Postgres to be back",
  );
});

t.test(
  "with NATS cut, the routes that use it answer 503 problem+json with Retry-After; none answers 500",
  async (t) => {
    const f = await fixtures();
    await whileCut(admin, natsProxy, "nats", async () => {
      t.match(await readiness(), { status: 503, body: { status: "not_ready", checks: { nats: false } } });
      for (const a of await callEvery(f)) {
        if (NEEDS_NATS.includes(a.route) || a.status >= 500) {
          t.ok(isOutageAnswer(a), describe(a));
        } else {
          t.ok(a.status < 500, describe(a));
        }
      }
    });
    for (const route of NEEDS_NATS) t.ok(routes.includes(route), `${route} is still a route`);
  },
);
