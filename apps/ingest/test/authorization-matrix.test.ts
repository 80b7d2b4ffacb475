import { randomUUID } from "node:crypto";
import { SCOPES, type Scope, scopesInclude, signUnsubscribeToken } from "@notify/core";
import { loadUnsubscribeKey, seedApiKey, seedTemplate } from "@notify/db";
import t from "tap";
import { cancelResponder, ingestApp } from "./support.js";

// The authorization matrix: every route of the public API × every scope (and no key, and an
// unknown key), and what one client may do with another's resources. The policy is written
// out here, so a route whose scope is loosened, or a new route without an entry, fails.

/** What each route needs: an API key scope, a user's inbox token, or nothing. */
const POLICY: Record<string, Scope | "inbox-token" | "public"> = {
  "POST /notifications": "ingest",
  "GET /notifications/{id}": "read",
  // Sending and canceling go together: a key that may send a notification may take it back.
  "POST /notifications/{id}/cancel": "ingest",
  "GET /users/{id}/notifications": "read",
  // An admin key manages its own client's keys; the routes check the client (below).
  "POST /keys": "admin",
  "GET /keys": "admin",
  "GET /keys/{id}": "admin",
  "DELETE /keys/{id}": "admin",
  "POST /keys/{id}/rotate": "admin",
  "GET /users/{id}/preferences": "preferences",
  "PUT /users/{id}/preferences": "preferences",
  "GET /users/{id}/contacts": "contacts",
  "PUT /users/{id}/contacts": "contacts",
  "POST /users/{id}/inbox-tokens": "inbox",
  "DELETE /users/{id}/inbox-tokens": "inbox",
  "DELETE /users/{id}/inbox-tokens/{tokenId}": "inbox",
  "GET /templates": "admin",
  "GET /templates/{id}": "admin",
  "PUT /templates/{id}": "operator",
  "GET /templates/{id}/versions/{version}": "admin",
  "POST /audiences": "broadcast",
  "GET /audiences": "broadcast",
  "GET /audiences/{id}": "broadcast",
  "POST /audiences/{id}/members/import": "broadcast",
  "PUT /audiences/{id}/members/{userId}": "broadcast",
  "DELETE /audiences/{id}/members/{userId}": "broadcast",
  "POST /broadcasts": "broadcast",
  "GET /broadcasts/{id}": "broadcast",
  "POST /broadcasts/{id}/cancel": "broadcast",
  "POST /broadcasts/{id}/pause": "broadcast",
  "POST /broadcasts/{id}/resume": "broadcast",
  // The deployment's: dead letters carry every client's bodies and addresses.
  "GET /dead-letters": "operator",
  "POST /dead-letters/replay": "operator",
  "GET /dead-letters/{seq}": "operator",
  // The operator's routes read and act across clients.
  "GET /ops/notifications": "operator",
  "GET /ops/notifications/{id}": "operator",
  "GET /ops/users/{id}/contact-changes": "operator",
  "GET /ops/streams": "operator",
  "GET /ops/providers": "operator",
  "GET /ops/broadcasts": "operator",
  "POST /ops/broadcasts/{id}/pause": "operator",
  "POST /ops/broadcasts/{id}/resume": "operator",
  "POST /ops/broadcasts/{id}/cancel": "operator",
  // A client's own webhook endpoints (another client's is a 404: webhook-endpoints.test.ts).
  "POST /webhook-endpoints": "webhooks",
  "GET /webhook-endpoints": "webhooks",
  "GET /webhook-endpoints/{id}": "webhooks",
  "PATCH /webhook-endpoints/{id}": "webhooks",
  "DELETE /webhook-endpoints/{id}": "webhooks",
  "POST /webhook-endpoints/{id}/rotate-secret": "webhooks",
  "GET /webhook-endpoints/{id}/attempts": "webhooks",
  "GET /webhook-endpoints/{id}/dead-letters": "webhooks",
  "POST /webhook-endpoints/{id}/replay": "webhooks",
  "POST /webhook-endpoints/{id}/test": "webhooks",
  "GET /ops/webhook-endpoints": "operator",
  "GET /ops/webhook-endpoints/{id}/dead-letters": "operator",
  "POST /ops/webhook-endpoints/{id}/replay": "operator",
  // A client's own suppressions and those that hold for every client; the entries for every
  // client are written and another client's read with an operator key only (suppressions.test.ts).
  "GET /suppressions": "contacts",
  "GET /suppressions/{channel}/{address}": "contacts",
  "PUT /suppressions/{channel}/{address}": "contacts",
  "DELETE /suppressions/{channel}/{address}": "contacts",
  "GET /inbox": "inbox-token",
  "PATCH /inbox/{itemId}": "inbox-token",
  "GET /inbox/stream": "inbox-token",
  "GET /inbox/counts": "inbox-token",
  "POST /inbox/mark-all": "inbox-token",
  "GET /inbox/preferences": "inbox-token",
  "PATCH /inbox/preferences": "inbox-token",
  "GET /openapi.json": "public",
  "GET /docs": "public",
  // Outside /api/v1 (the links in email): the token's MAC is the authority, no key is looked at.
  "GET /u/{token}": "public",
  "POST /u/{token}": "public",
};

const { app, database, deps } = await ingestApp(t);
// The processor's half of POST …/cancel: another client's notification is a 404 there.
await cancelResponder(t, deps);
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const keys: Record<string, string> = {};
for (const scope of SCOPES)
  keys[scope] = await seedApiKey(database, { clientId: "shop", name: scope, scopes: [scope] });
const unsubscribeToken = signUnsubscribeToken(await loadUnsubscribeKey(database), {
  clientId: "shop",
  userId: "matrix-user",
  category: "news",
});
const bankRead = await seedApiKey(database, { clientId: "bank", name: "bank read", scopes: ["read"] });
const bankAdmin = await seedApiKey(database, { clientId: "bank", name: "bank admin", scopes: ["admin"] });
const bankOperator = await seedApiKey(database, { clientId: "bank", name: "bank operator", scopes: ["operator"] });

const served = [
  ...new Set(
    app.routes
      .filter((r) => r.method !== "ALL" && (r.path.startsWith("/api/v1/") || r.path.startsWith("/u/")))
      .map((r) => `${r.method} ${r.path.replace(/^\/api\/v1/, "").replace(/:(\w+)/g, "{$1}")}`),
  ),
];

const request = (method: string, path: string, key: string | null, body?: unknown) =>
  app.request(path.startsWith("/u/") ? path : `/api/v1${path}`, {
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
    .replace("{token}", unsubscribeToken)
    .replace("{version}", "1")
    .replace("{seq}", "1")
    .replace("{itemId}", "1")
    .replace("{tokenId}", "01900000-0000-7000-8000-000000000000")
    .replace("{userId}", "user-1")
    .replace("{channel}", "email")
    .replace("{address}", "ada%40example.com")
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
      } else if (scopesInclude([scope], needs)) {
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
  const operatorOther = await request("GET", `/notifications/${notification_id}`, bankOperator);
  t.equal(operatorOther.status, 404, "and its operator key on the client routes: only /ops/ reads across clients");
  const bankIngest = await seedApiKey(database, { clientId: "bank", name: "bank ingest", scopes: ["ingest"] });
  for (const key of [bankIngest, bankOperator]) {
    const cancel = await request("POST", `/notifications/${notification_id}/cancel`, key);
    t.equal(cancel.status, 404, "nor can another client cancel it");
    t.match(await cancel.json(), { code: "not_found" });
  }
  // Its own client may (no processor routes it here: not routed yet, so 409 and try again).
  const own = await request("POST", `/notifications/${notification_id}/cancel`, keys.ingest as string);
  t.equal(own.status, 409, "own, not routed yet: 409");
  t.equal(own.headers.get("retry-after"), "1");
  t.match(await own.json(), { code: "notification_not_routed" });

  const created = await request("POST", "/audiences", keys.broadcast as string, { name: "Matrix" });
  const audience = (await created.json()) as { id: string };
  (await request("PUT", `/audiences/${audience.id}/members/matrix-user`, keys.broadcast as string)).body?.cancel();
  const broadcast = await request("POST", "/broadcasts", keys.broadcast as string, {
    audience_id: audience.id,
    category: "news",
    template_id: "welcome",
    data: { name: "all" },
  });
  if (broadcast.status === 202 || broadcast.status === 201) {
    const { broadcast_id, id } = (await broadcast.json()) as { broadcast_id?: string; id?: string };
    const bid = broadcast_id ?? id;
    t.equal((await request("GET", `/broadcasts/${bid}`, keys.broadcast as string)).status, 200, "own broadcast: 200");
    t.equal((await request("GET", `/broadcasts/${bid}`, bankAdmin)).status, 404, "another client's: 404");
    t.equal(
      (await request("POST", `/broadcasts/${bid}/cancel`, bankAdmin, {})).status,
      404,
      "nor can another client cancel it",
    );
    for (const action of ["pause", "resume"]) {
      t.equal((await request("POST", `/broadcasts/${bid}/${action}`, bankAdmin, {})).status, 404, `nor ${action} it`);
    }
    // The operator's routes act across clients: an operator key sees and acts on it, an admin key does not.
    t.equal((await request("GET", `/ops/notifications/${notification_id}`, bankAdmin)).status, 403, "admin: 403");
    const seen = await request("GET", `/ops/notifications/${notification_id}`, bankOperator);
    t.equal(seen.status, 200, "the operator's route shows any client's notification to an operator key");
    t.match(await seen.json(), { client_id: "shop" });
    const paused = await request("POST", `/ops/broadcasts/${bid}/pause`, bankOperator, {});
    t.equal(paused.status, 200, "and pauses any client's broadcast");
    t.match(await paused.json(), { client_id: "shop", status: "paused" });
  } else {
    t.fail(`a broadcast could not be created: ${broadcast.status} ${await broadcast.text()}`);
  }
});

t.test("keys: an admin key manages its own client's keys and grants no scope it lacks", async (t) => {
  const shopKeys = (await (await request("GET", "/keys?page_size=100", keys.operator as string)).json()) as {
    data: { id: string; client_id: string }[];
  };
  const shopKeyId = shopKeys.data.find((k) => k.client_id === "shop")?.id as string;
  const mintFor = async (key: string, body: object) => request("POST", "/keys", key, body);

  const other = await mintFor(bankAdmin, { name: "x", client_id: "shop", scopes: ["read"] });
  t.equal(other.status, 403, "an admin key cannot mint for another client");
  t.match(await other.json(), { code: "insufficient_scope" });
  t.equal((await mintFor(bankAdmin, { name: "x", scopes: ["operator"] })).status, 403, "nor grant operator");
  t.equal((await mintFor(keys.inbox as string, { name: "x", scopes: ["read"] })).status, 403, "without admin: 403");
  const own = await mintFor(bankAdmin, { name: "child", scopes: ["read", "ingest"] });
  t.equal(own.status, 201, "it mints for its own client (client_id defaults to it)");
  t.match(await own.json(), { client_id: "bank", scopes: ["read", "ingest"], minted_by: String });

  t.equal((await request("GET", "/keys?client_id=shop", bankAdmin)).status, 403, "it cannot list another client's");
  const listed = (await (await request("GET", "/keys?page_size=100", bankAdmin)).json()) as {
    data: { client_id: string }[];
  };
  t.ok(listed.data.length > 0 && listed.data.every((k) => k.client_id === "bank"), "its list is its client's keys");
  t.equal((await request("GET", `/keys/${shopKeyId}`, bankAdmin)).status, 404, "another client's key: 404");
  t.equal((await request("POST", `/keys/${shopKeyId}/rotate`, bankAdmin, {})).status, 404, "nor rotate it");
  t.equal((await request("DELETE", `/keys/${shopKeyId}`, bankAdmin)).status, 404, "nor revoke it");
  t.equal((await request("GET", "/notifications/x", keys.read as string)).status, 404, "the shop key still works");

  const forShop = await mintFor(keys.operator as string, { name: "by operator", client_id: "bank", scopes: ["read"] });
  t.equal(forShop.status, 201, "an operator key mints for any client");
});

t.test("revoking a key revokes every key minted from it, through rotations too", async (t) => {
  const root = await seedApiKey(database, { clientId: "bank", name: "root", scopes: ["admin"] });
  const child = (await (await request("POST", "/keys", root, { name: "child", scopes: ["admin"] })).json()) as {
    id: string;
    key: string;
  };
  const grandchild = (await (await request("POST", "/keys", child.key, { name: "gc", scopes: ["read"] })).json()) as {
    key: string;
  };
  const works = async (key: string) => (await request("GET", "/notifications/x", key)).status === 404;
  t.ok((await works(child.key)) && (await works(grandchild.key)), "both work");
  // The child rotates itself: its replacement keeps the lineage, and the grandchild is now the replacement's.
  const rotated = (await (await request("POST", `/keys/${child.id}/rotate`, child.key, {})).json()) as { key: string };
  t.ok(await works(rotated.key), "the replacement works");
  const rootId = (
    (await (await request("GET", "/keys?page_size=100", keys.operator as string)).json()) as {
      data: { id: string; name: string }[];
    }
  ).data.find((k) => k.name === "root")?.id as string;
  t.equal((await request("DELETE", `/keys/${rootId}`, keys.operator as string)).status, 204);
  t.notOk(await works(root), "the root is revoked");
  t.notOk(await works(rotated.key), "so is the key it minted (after that key's rotation)");
  t.notOk(await works(grandchild.key), "and the key that one minted");
});

t.test("contacts: writing an address needs the contacts scope and is recorded with its key", async (t) => {
  const body = { email: "ada@example.com", phone: "+14155550100" };
  t.equal((await request("PUT", "/users/otp-user/contacts", keys.preferences as string, body)).status, 403);
  t.equal((await request("PUT", "/users/otp-user/contacts", keys.contacts as string, body)).status, 200);
  t.equal((await request("PUT", "/users/otp-user/contacts", keys.contacts as string, body)).status, 200, "unchanged");
  const moved = { ...body, phone: "+14155550199" };
  t.equal((await request("PUT", "/users/otp-user/contacts", keys.contacts as string, moved)).status, 200);
  const changes = await request("GET", "/ops/users/otp-user/contact-changes", keys.operator as string);
  t.equal(changes.status, 200);
  const { data } = (await changes.json()) as { data: { fields: string[]; client_id: string; key_id: string }[] };
  t.equal(data.length, 2, "one record per change, none for a write that changed nothing");
  t.same(data[0]?.fields, ["phone"], "the newest first, naming what changed");
  t.same(data[1]?.fields, ["email", "phone"]);
  t.ok(
    data.every((change) => change.client_id === "shop" && change.key_id.length > 0),
    "with the key and client",
  );
});

t.test("an admin key neither rotates nor revokes a key holding a scope it lacks", async (t) => {
  const ops = await seedApiKey(database, { clientId: "bank", name: "bank ops", scopes: ["operator"] });
  const listed = (await (await request("GET", "/keys?page_size=100", ops)).json()) as {
    data: { id: string; name: string }[];
  };
  const opsId = listed.data.find((k) => k.name === "bank ops")?.id as string;
  const rotate = await request("POST", `/keys/${opsId}/rotate`, bankAdmin, {});
  t.equal(rotate.status, 404, "rotating the operator key of its own client: as if it did not exist");
  t.notMatch(await rotate.text(), /ntf_/, "no key in the answer");
  t.equal((await request("DELETE", `/keys/${opsId}`, bankAdmin)).status, 404, "nor revoke it");
  t.equal((await request("GET", "/ops/streams", ops)).status, 200, "the operator key still works");
});

t.test("a compromised key that rotates itself is still reached by the revocation of the old key", async (t) => {
  const compromised = await seedApiKey(database, { clientId: "bank", name: "compromised", scopes: ["admin"] });
  const works = async (key: string) => (await request("GET", "/notifications/x", key)).status === 404;
  const all = (await (await request("GET", "/keys?page_size=200&client_id=bank", keys.operator as string)).json()) as {
    data: { id: string; name: string; status: string }[];
  };
  const id = all.data.find((k) => k.name === "compromised")?.id as string;
  const escaped = (await (
    await request("POST", `/keys/${id}/rotate`, compromised, { grace_seconds: 3600 })
  ).json()) as {
    id: string;
    key: string;
  };
  t.ok(await works(escaped.key), "the replacement works");
  const minted = await request("POST", "/keys", compromised, { name: "from grace", scopes: ["read"] });
  t.equal(minted.status, 403, "a key in its grace period mints nothing");
  t.equal((await request("DELETE", `/keys/${id}`, keys.operator as string)).status, 204, "the defender revokes it");
  t.notOk(await works(compromised), "the key is refused");
  t.notOk(await works(escaped.key), "and so is the replacement it made for itself");
});
