import { randomUUID } from "node:crypto";
import { SCOPES, type Scope } from "@notify/core";
import { seedApiKey, seedTemplate } from "@notify/db";
import t from "tap";
import { ingestApp } from "./support.js";

// The authorization matrix: every route of the public API × every scope (and no key, and an
// unknown key), and what one client may do with another's resources. The policy is written
// out here, so a route whose scope is loosened, or a new route without an entry, fails.

/** What each route needs: an API key scope, a user's inbox token, or nothing. */
const POLICY: Record<string, Scope | "inbox-token" | "public"> = {
  "POST /notifications": "ingest",
  "GET /notifications/{id}": "read",
  "GET /users/{id}/notifications": "read",
  "POST /keys": "admin",
  "GET /keys": "admin",
  "GET /keys/{id}": "admin",
  "DELETE /keys/{id}": "admin",
  "POST /keys/{id}/rotate": "admin",
  "GET /users/{id}/preferences": "preferences",
  "PUT /users/{id}/preferences": "preferences",
  "GET /users/{id}/contacts": "preferences",
  "PUT /users/{id}/contacts": "preferences",
  "POST /users/{id}/inbox-tokens": "inbox",
  "GET /templates": "admin",
  "GET /templates/{id}": "admin",
  "PUT /templates/{id}": "admin",
  "GET /templates/{id}/versions/{version}": "admin",
  "GET /dead-letters": "admin",
  "POST /audiences": "admin",
  "GET /audiences": "admin",
  "GET /audiences/{id}": "admin",
  "POST /audiences/{id}/members/import": "admin",
  "PUT /audiences/{id}/members/{userId}": "admin",
  "DELETE /audiences/{id}/members/{userId}": "admin",
  "POST /broadcasts": "admin",
  "GET /broadcasts/{id}": "admin",
  "POST /broadcasts/{id}/cancel": "admin",
  "POST /broadcasts/{id}/pause": "admin",
  "POST /broadcasts/{id}/resume": "admin",
  "POST /dead-letters/replay": "admin",
  "GET /dead-letters/{seq}": "admin",
  // The operator's routes: across clients, so the scope that already manages every client's keys.
  "GET /ops/notifications": "admin",
  "GET /ops/notifications/{id}": "admin",
  "GET /ops/streams": "admin",
  "GET /ops/providers": "admin",
  "GET /ops/broadcasts": "admin",
  "POST /ops/broadcasts/{id}/pause": "admin",
  "POST /ops/broadcasts/{id}/resume": "admin",
  "POST /ops/broadcasts/{id}/cancel": "admin",
  "GET /inbox": "inbox-token",
  "PATCH /inbox/{itemId}": "inbox-token",
  "GET /inbox/stream": "inbox-token",
  "GET /openapi.json": "public",
  "GET /docs": "public",
};

const { app, database } = await ingestApp(t);
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const keys: Record<string, string> = {};
for (const scope of SCOPES)
  keys[scope] = await seedApiKey(database, { clientId: "shop", name: scope, scopes: [scope] });
const bankRead = await seedApiKey(database, { clientId: "bank", name: "bank read", scopes: ["read"] });
const bankAdmin = await seedApiKey(database, { clientId: "bank", name: "bank admin", scopes: ["admin"] });

const served = [
  ...new Set(
    app.routes
      .filter((r) => r.method !== "ALL" && r.path.startsWith("/api/v1/"))
      .map((r) => `${r.method} ${r.path.slice("/api/v1".length).replace(/:(\w+)/g, "{$1}")}`),
  ),
];

const request = (method: string, path: string, key: string | null, body?: unknown) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      "idempotency-key": randomUUID(),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** A concrete path for a route pattern (the resource need not exist: authorization comes first). */
const concrete = (pattern: string) =>
  pattern
    .replace("{version}", "1")
    .replace("{seq}", "1")
    .replace("{itemId}", "1")
    .replace("{userId}", "user-1")
    .replace("{id}", pattern.startsWith("/keys") ? "key_missing" : "user-1");

t.test("every served route has a policy, and the document states the same scope", async (t) => {
  t.same(
    served.filter((route) => !(route in POLICY)),
    [],
    "no route without a policy",
  );
  t.same(
    Object.keys(POLICY).filter((route) => !served.includes(route)),
    [],
    "no policy for a route that is not served",
  );
  const doc = (await (await app.request("/api/v1/openapi.json")).json()) as {
    paths: Record<string, Record<string, { "x-scope"?: string }>>;
  };
  for (const [route, needs] of Object.entries(POLICY)) {
    const [method, pattern] = route.split(" ") as [string, string];
    const stated = doc.paths[`/api/v1${pattern}`]?.[method.toLowerCase()]?.["x-scope"] ?? null;
    t.equal(stated, needs === "inbox-token" || needs === "public" ? null : needs, `${route} documents its scope`);
  }
});

t.test("route × scope: a key without the scope is refused before anything runs", async (t) => {
  for (const [route, needs] of Object.entries(POLICY)) {
    const [method, pattern] = route.split(" ") as [string, string];
    const path = concrete(pattern);
    const body = method === "GET" || method === "DELETE" ? undefined : {};
    const none = await request(method, path, null, body);
    const unknown = await request(method, path, "ntf_unknown-key-0000000000000000000000000000000", body);
    if (needs === "public") {
      t.equal(none.status, 200, `${route} is public`);
      continue;
    }
    t.equal(none.status, 401, `${route} without a credential: 401`);
    t.equal(unknown.status, 401, `${route} with an unknown key: 401`);
    for (const scope of SCOPES) {
      const answer = await request(method, path, keys[scope] as string, body);
      await answer.body?.cancel();
      if (needs === "inbox-token") {
        t.equal(answer.status, 401, `${route} takes an inbox token, never a ${scope} key`);
      } else if (scope === needs || scope === "admin") {
        t.notOk([401, 403].includes(answer.status), `${route} with ${scope}: allowed (${answer.status})`);
      } else {
        t.equal(answer.status, 403, `${route} with ${scope}: 403`);
        t.match(await (await request(method, path, keys[scope] as string, body)).json(), {
          code: "insufficient_scope",
        });
      }
    }
  }
});

t.test("own and other client: another client's notification and broadcast are a 404", async (t) => {
  const sent = await request("POST", "/notifications", keys.ingest as string, {
    user_id: "matrix-user",
    category: "account",
    template_id: "welcome",
    data: { name: "Ada" },
    priority: "transactional",
  });
  t.equal(sent.status, 202);
  const { notification_id } = (await sent.json()) as { notification_id: string };
  t.equal((await request("GET", `/notifications/${notification_id}`, keys.read as string)).status, 200, "own: 200");
  const other = await request("GET", `/notifications/${notification_id}`, bankRead);
  t.equal(other.status, 404, "another client's: 404, as if it did not exist");
  const otherList = (await (await request("GET", "/users/matrix-user/notifications", bankRead)).json()) as {
    data: unknown[];
  };
  t.same(otherList.data, [], "and absent from that client's list of the user");
  const adminOther = await request("GET", `/notifications/${notification_id}`, bankAdmin);
  t.equal(adminOther.status, 404, "even for another client's admin key: notifications are per client");

  const created = await request("POST", "/audiences", keys.admin as string, { name: "Matrix" });
  const audience = (await created.json()) as { id: string };
  (await request("PUT", `/audiences/${audience.id}/members/matrix-user`, keys.admin as string)).body?.cancel();
  const broadcast = await request("POST", "/broadcasts", keys.admin as string, {
    audience_id: audience.id,
    category: "news",
    template_id: "welcome",
    data: { name: "all" },
  });
  if (broadcast.status === 202 || broadcast.status === 201) {
    const { broadcast_id, id } = (await broadcast.json()) as { broadcast_id?: string; id?: string };
    const bid = broadcast_id ?? id;
    t.equal((await request("GET", `/broadcasts/${bid}`, keys.admin as string)).status, 200, "own broadcast: 200");
    t.equal((await request("GET", `/broadcasts/${bid}`, bankAdmin)).status, 404, "another client's: 404");
    t.equal(
      (await request("POST", `/broadcasts/${bid}/cancel`, bankAdmin, {})).status,
      404,
      "nor can another client cancel it",
    );
    for (const action of ["pause", "resume"]) {
      t.equal((await request("POST", `/broadcasts/${bid}/${action}`, bankAdmin, {})).status, 404, `nor ${action} it`);
    }
    // The operator's routes act across clients: another client's admin key sees and acts on it.
    const seen = await request("GET", `/ops/notifications/${notification_id}`, bankAdmin);
    t.equal(seen.status, 200, "the operator's route shows any client's notification to an admin key");
    t.match(await seen.json(), { client_id: "shop" });
    const paused = await request("POST", `/ops/broadcasts/${bid}/pause`, bankAdmin, {});
    t.equal(paused.status, 200, "and pauses any client's broadcast");
    t.match(await paused.json(), { client_id: "shop", status: "paused" });
  } else {
    t.fail(`a broadcast could not be created: ${broadcast.status} ${await broadcast.text()}`);
  }
});
