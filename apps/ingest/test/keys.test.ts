import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { hashKey } from "@notify/core";
import { type ApiKeyRecord, createKey, type RotatedApiKey, revokeKey, rotateKey, seedApiKey } from "@notify/db";
import { eventually } from "@notify/testing";
import t, { type Test } from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { ingestApp } from "./support.js";

// The admin API for API keys through app.request(), on a real Postgres database. The lookup has
// no cache, so a revocation takes effect on the next request.
const { app, database, lines } = await ingestApp(t, { maxBodyBytes: 4096 });
const adminKey = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const readKey = await seedApiKey(database, { clientId: "shop", name: "shop reader", scopes: ["read"] });

const call = (method: string, path: string, options: { key?: string; body?: unknown } = {}) => {
  const headers: Record<string, string> = {};
  if (options.key !== undefined) headers["x-api-key"] = options.key;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  return app.request(`/api/v1${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
};
const admin = (method: string, path: string, body?: unknown) => call(method, path, { key: adminKey, body });

/** A request that needs the read scope: 404 for an unknown notification proves the key passed. */
const authenticates = async (key: string) => {
  const response = await call("GET", `/notifications/${randomUUID()}`, { key });
  if (response.status !== 404 && response.status !== 401) throw new Error(`unexpected ${response.status}`);
  return response.status === 404;
};

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as { code: string; errors?: Array<{ field: string }> };
  t.match(body, { status, code });
  return body;
}

const issue = async (body: Record<string, unknown>) => {
  const response = await admin("POST", "/keys", body);
  if (response.status !== 201) throw new Error(`POST /keys answered ${response.status}`);
  return (await response.json()) as ApiKeyRecord & { key: string };
};

t.test("the admin routes need an admin key", async (t) => {
  const routes: Array<[string, string, unknown?]> = [
    ["GET", "/keys"],
    ["POST", "/keys", { name: "x", client_id: "x", scopes: ["read"] }],
    ["GET", `/keys/${randomUUID()}`],
    ["POST", `/keys/${randomUUID()}/rotate`, {}],
    ["DELETE", `/keys/${randomUUID()}`],
  ];
  for (const [method, path, body] of routes) {
    const none = await call(method, path, { body });
    await expectProblem(t, none, 401, "unauthenticated");
    t.equal(none.headers.get("www-authenticate"), 'Bearer realm="notify"');
    const reader = await call(method, path, { key: readKey, body });
    await expectProblem(t, reader, 403, "insufficient_scope");
    t.match(reader.headers.get("www-authenticate"), /error="insufficient_scope", scope="admin"/);
  }
});

t.test("POST /keys issues a key once; it authenticates and only its hash is stored", async (t) => {
  const response = await admin("POST", "/keys", {
    name: "shop ingest",
    client_id: "shop",
    scopes: ["ingest", "read"],
    rate_limit: { burst: 100, per_second: 20 },
  });
  t.equal(response.status, 201);
  t.equal(response.headers.get("cache-control"), "no-store");
  const issued = (await response.json()) as ApiKeyRecord & { key: string };
  t.equal(response.headers.get("location"), `/api/v1/keys/${issued.id}`);
  t.match(issued, {
    id: String,
    key: /^ntf_[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{22}$/,
    client_id: "shop",
    name: "shop ingest",
    scopes: ["ingest", "read"],
    rate_limit: { burst: 100, per_second: 20 },
    status: "active",
    created_at: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
    revoked_at: null,
  });
  t.equal(issued.prefix, issued.key.slice(0, 12));

  t.ok(await authenticates(issued.key), "the new key authenticates");

  const [row] =
    await database.sql`select key_hash, row_to_json(k)::text as whole from api_keys k where id = ${issued.id}`;
  t.equal(row?.key_hash, hashKey(issued.key), "the stored hash is the SHA-256 of the key");
  t.notOk(String(row?.whole).includes(issued.key.slice(4)), "no column holds the plaintext");

  const fetched = await admin("GET", `/keys/${issued.id}`);
  t.equal(fetched.status, 200);
  const view = (await fetched.json()) as Record<string, unknown>;
  t.same(Object.keys(view).sort(), [
    "client_id",
    "created_at",
    "id",
    "last_used_at",
    "minted_by",
    "name",
    "prefix",
    "rate_limit",
    "revoked_at",
    "scopes",
    "status",
  ]);
  t.notOk(
    lines().some((line) => line.includes(issued.key.slice(4))),
    "the key never reaches the log",
  );
  t.ok(
    lines().some((line) => line.includes('"msg":"API key created"') && line.includes(issued.id)),
    "issuing is logged, with the key id",
  );
});

t.test("POST /keys refuses invalid bodies and stores nothing", async (t) => {
  const count = async () => Number((await database.sql`select count(*)::int as n from api_keys`)[0]?.n);
  const before = await count();
  const valid = { name: "n", client_id: "shop", scopes: ["read"] };
  const cases: Array<[unknown, string]> = [
    [{}, "name"],
    [{ ...valid, scopes: [] }, "scopes"],
    [{ ...valid, scopes: ["root"] }, "scopes.0"],
    [{ ...valid, scopes: ["read", "read"] }, "scopes.1"],
    [{ ...valid, name: "  " }, "name"],
    [{ ...valid, client_id: "has space" }, "client_id"],
    [{ ...valid, rate_limit: { burst: 0, per_second: 1 } }, "rate_limit.burst"],
    [{ ...valid, rate_limit: { burst: 1 } }, "rate_limit.per_second"],
    [{ ...valid, rate_limit: { burst: 1, per_second: 1.5 } }, "rate_limit.per_second"],
    [{ ...valid, rate_limit: { burst: 1, per_second: 1, extra: 1 } }, "rate_limit.extra"],
    [{ ...valid, key: "ntf_chosen" }, "key"],
  ];
  for (const [body, field] of cases) {
    const problem = await expectProblem(t, await admin("POST", "/keys", body), 400, "validation_failed");
    t.ok(
      problem.errors?.some((error) => error.field === field),
      `${JSON.stringify(body)} names ${field}`,
    );
  }
  const malformed = await app.request("/api/v1/keys", {
    method: "POST",
    headers: { "x-api-key": adminKey, "content-type": "application/json" },
    body: "{",
  });
  await expectProblem(t, malformed, 400, "malformed_json");
  t.equal(await count(), before);
});

t.test("DELETE /keys/{id} revokes at once, idempotently; unknown ids are 404", async (t) => {
  const issued = await issue({ name: "doomed", client_id: "shop", scopes: ["read"] });
  t.ok(await authenticates(issued.key));

  const deleted = await admin("DELETE", `/keys/${issued.id}`);
  t.equal(deleted.status, 204);
  t.equal(await deleted.text(), "");
  const refused = await call("GET", `/notifications/${randomUUID()}`, { key: issued.key });
  await expectProblem(t, refused, 401, "invalid_api_key");

  const first = (await (await admin("GET", `/keys/${issued.id}`)).json()) as ApiKeyRecord;
  t.equal(first.status, "revoked");
  t.equal((await admin("DELETE", `/keys/${issued.id}`)).status, 204, "revoking again is fine");
  const second = (await (await admin("GET", `/keys/${issued.id}`)).json()) as ApiKeyRecord;
  t.equal(second.revoked_at, first.revoked_at, "the first revocation time is kept");

  await expectProblem(t, await admin("DELETE", `/keys/${randomUUID()}`), 404, "not_found");
  await expectProblem(t, await admin("GET", `/keys/${randomUUID()}`), 404, "not_found");
});

t.test("rotation issues a like key; the old one works through its grace period only", async (t) => {
  const old = await issue({
    name: "rotating",
    client_id: "shop",
    scopes: ["ingest", "read"],
    rate_limit: { burst: 5, per_second: 2 },
  });
  const response = await admin("POST", `/keys/${old.id}/rotate`, { grace_seconds: 1 });
  t.equal(response.status, 201);
  t.equal(response.headers.get("cache-control"), "no-store");
  const rotated = (await response.json()) as RotatedApiKey;
  t.not(rotated.id, old.id);
  t.not(rotated.key, old.key);
  t.match(rotated, {
    client_id: "shop",
    name: "rotating",
    scopes: ["ingest", "read"],
    rate_limit: { burst: 5, per_second: 2 },
    status: "active",
    previous: { id: old.id, status: "grace", revoked_at: String },
  });

  t.ok(await authenticates(rotated.key), "the new key works");
  t.ok(await authenticates(old.key), "the old key works during the grace period");
  await sleep(1200);
  t.notOk(await authenticates(old.key), "and not after it");
  t.ok(await authenticates(rotated.key));
  const after = (await (await admin("GET", `/keys/${old.id}`)).json()) as ApiKeyRecord;
  t.equal(after.status, "revoked");
});

t.test("rotation without a body revokes the old key at once; bad bodies and ids are refused", async (t) => {
  const old = await issue({ name: "quick", client_id: "shop", scopes: ["read"] });
  const response = await app.request(`/api/v1/keys/${old.id}/rotate`, {
    method: "POST",
    headers: { "x-api-key": adminKey },
  });
  t.equal(response.status, 201);
  const rotated = (await response.json()) as RotatedApiKey;
  t.equal(rotated.previous.status, "revoked");
  t.notOk(await authenticates(old.key));
  t.ok(await authenticates(rotated.key));

  for (const grace of [-1, 604_801, 1.5, "60"]) {
    const problem = await expectProblem(
      t,
      await admin("POST", `/keys/${rotated.id}/rotate`, { grace_seconds: grace }),
      400,
      "validation_failed",
    );
    t.match(problem.errors, [{ field: "grace_seconds" }]);
  }
  await expectProblem(t, await admin("POST", `/keys/${rotated.id}/rotate`, { grace: 5 }), 400, "validation_failed");
  await expectProblem(t, await admin("POST", `/keys/${randomUUID()}/rotate`, {}), 404, "not_found");
  t.ok(await authenticates(rotated.key), "a refused rotation leaves the key alone");
});

t.test("rotating never extends an earlier revocation, and a revoked key is not rotated", async (t) => {
  const old = await issue({ name: "short", client_id: "shop", scopes: ["read"] });
  const first = (await (await admin("POST", `/keys/${old.id}/rotate`, { grace_seconds: 60 })).json()) as RotatedApiKey;
  const again = (await (
    await admin("POST", `/keys/${old.id}/rotate`, { grace_seconds: 3600 })
  ).json()) as RotatedApiKey;
  t.equal(again.previous.revoked_at, first.previous.revoked_at, "a second rotation in the grace keeps its end");
  await admin("DELETE", `/keys/${old.id}`);
  const before = (await (await admin("GET", `/keys/${old.id}`)).json()) as ApiKeyRecord;
  await expectProblem(t, await admin("POST", `/keys/${old.id}/rotate`, { grace_seconds: 3600 }), 404, "not_found");
  const after = (await (await admin("GET", `/keys/${old.id}`)).json()) as ApiKeyRecord;
  t.equal(after.revoked_at, before.revoked_at);
  t.notOk(await authenticates(old.key));
});

t.test("GET /keys pages by offset, newest first, and clamps large pages", async (t) => {
  const created: string[] = [];
  for (let i = 0; i < 5; i++) created.push((await issue({ name: `p${i}`, client_id: "pager", scopes: ["read"] })).id);
  const newestFirst = [...created].reverse();
  type Page = { data: ApiKeyRecord[]; page: number; page_size: number; total_count: number };
  const page = async (query: string) => {
    const response = await admin("GET", `/keys?client_id=pager&${query}`);
    t.equal(response.status, 200, query);
    return (await response.json()) as Page;
  };

  const first = await page("page_size=2");
  t.match(first, { page: 1, page_size: 2, total_count: 5 });
  const third = await page("page=3&page_size=2");
  const beyond = await page("page=4&page_size=2");
  const second = await page("page=2&page_size=2");
  t.same(
    [...first.data, ...second.data, ...third.data].map((key) => key.id),
    newestFirst,
    "pages cover every key once, newest first",
  );
  t.same(beyond.data, []);
  t.equal(beyond.total_count, 5);

  const defaults = await page("");
  t.match(defaults, { page: 1, page_size: 50, total_count: 5 });
  const clamped = await page("page_size=100000");
  t.equal(clamped.page_size, 200, "too large a page size is clamped");

  const everyone = (await (await admin("GET", "/keys")).json()) as Page;
  t.ok(everyone.total_count > 5, "without client_id every client's keys are listed");
  t.notOk(
    everyone.data.some((key) => "key" in key || "key_hash" in key),
    "a listing carries neither plaintext nor hash",
  );

  await admin("DELETE", `/keys/${created[0]}`);
  t.equal((await page("")).total_count, 4, "revoked keys are left out by default");
  t.equal((await page("include_revoked=true")).total_count, 5);
});

t.test("GET /keys refuses bad paging and unknown parameters", async (t) => {
  const cases: Array<[string, string]> = [
    ["page_size=0", "page_size"],
    ["page_size=-1", "page_size"],
    ["page_size=1.5", "page_size"],
    ["page_size=ten", "page_size"],
    ["page=0", "page"],
    ["page=99999999999999999999", "page"],
    ["include_revoked=maybe", "include_revoked"],
    ["client_id=has%20space", "client_id"],
    ["sort=name", "sort"],
  ];
  for (const [query, field] of cases) {
    const problem = await expectProblem(t, await admin("GET", `/keys?${query}`), 400, "validation_failed");
    t.match(problem.errors, [{ field }], query);
  }
});

t.test("a key's use is recorded in last_used_at", async (t) => {
  const issued = await issue({ name: "used", client_id: "shop", scopes: ["read"] });
  t.equal(issued.last_used_at, null);
  await authenticates(issued.key);
  const used = await eventually(async () => {
    const key = (await (await admin("GET", `/keys/${issued.id}`)).json()) as ApiKeyRecord;
    return key.last_used_at ?? undefined;
  });
  t.ok(Date.parse(used) > Date.parse(issued.created_at) - 1000);
});

t.test("a cached key in its grace period stops working when the grace period ends", async (t) => {
  const lookup = createKeyLookup(database, 60_000);
  const key = await seedApiKey(database, { clientId: "shop", name: "cached", scopes: ["read"] });
  const [row] = await database.sql<{ id: string }[]>`select id from api_keys where key_hash = ${hashKey(key)}`;
  await rotateKey(database, row?.id as string, { graceSeconds: 1 });
  t.match(await lookup(key), { clientId: "shop", scopes: ["read"] });
  await sleep(1200);
  t.equal(await lookup(key), null, "the cache lifetime does not outlast the grace period");
});

t.test("a flood of unknown keys never evicts a cached valid key", async (t) => {
  const lookup = createKeyLookup(database, 60_000);
  const issued = await createKey(database, { clientId: "shop", name: "busy", scopes: ["read"] });
  t.match(await lookup(issued.key), { clientId: "shop" });
  // Revoked now: only the cache still knows the key, so a miss would answer null.
  await revokeKey(database, issued.id);
  let found = 0;
  for (let i = 0; i < 10_050; i++) if ((await lookup(`nk_unknown_${i}`)) !== null) found++;
  t.equal(found, 0, "unknown keys are unknown");
  t.match(await lookup(issued.key), { clientId: "shop" }, "still served from the cache within its lifetime");
});
