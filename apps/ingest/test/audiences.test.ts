import { seedApiKey } from "@notify/db";
import t from "tap";
import { ingestApp } from "./support.js";

const { app, database } = await ingestApp(t);
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["admin"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read"] });

const call = async (
  method: string,
  path: string,
  init: { body?: string | ReadableStream<Uint8Array>; type?: string; key?: string } = {},
) => {
  const response = await app.request(`/api/v1${path}`, {
    method,
    headers: {
      "x-api-key": init.key ?? admin,
      ...(init.type ? { "content-type": init.type } : {}),
    },
    ...(init.body === undefined ? {} : { body: init.body, duplex: "half" }),
  } as RequestInit);
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
};

const create = async (name: string) =>
  (await call("POST", "/audiences", { body: JSON.stringify({ name }), type: "application/json" })).body;

/** A body produced a line at a time, the way a large upload arrives. */
const streamed = (count: number, line: (i: number) => string) => {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i >= count) return controller.close();
      const lines: string[] = [];
      for (let n = 0; n < 997 && i < count; n++) lines.push(line(i++));
      controller.enqueue(new TextEncoder().encode(`${lines.join("\n")}\n`));
    },
  });
};

t.test("create, read, list", async (t) => {
  const created = await call("POST", "/audiences", {
    body: JSON.stringify({ name: "Spring sale" }),
    type: "application/json",
  });
  t.equal(created.status, 201);
  t.match(created.body, { name: "Spring sale", member_count: 0 });
  t.same((await call("GET", `/audiences/${created.body.id}`)).body, created.body);
  const page = await call("GET", "/audiences?page_size=1");
  t.match(page.body, { page: 1, page_size: 1 });
  t.ok(page.body.total_count >= 1);
  t.equal((await call("GET", "/audiences/nope")).status, 404);
  t.equal(
    (await call("POST", "/audiences", { body: JSON.stringify({ name: "" }), type: "application/json" })).status,
    400,
  );
});

t.test("a streamed NDJSON import of 12,000 members, repeats kept once", async (t) => {
  const audience = await create("ndjson");
  const imported = await call("POST", `/audiences/${audience.id}/members/import`, {
    body: streamed(12_000, (i) =>
      i % 2 ? JSON.stringify(`user-${i % 11_000}`) : JSON.stringify({ user_id: `user-${i % 11_000}` }),
    ),
    type: "application/x-ndjson",
  });
  t.equal(imported.status, 200, JSON.stringify(imported.body));
  t.same(imported.body, { audience_id: audience.id, received: 12_000, added: 11_000, member_count: 11_000 });
  const again = await call("POST", `/audiences/${audience.id}/members/import`, {
    body: '"user-1"\n"user-new"\n',
    type: "application/x-ndjson; charset=utf-8",
  });
  t.same(again.body, { audience_id: audience.id, received: 2, added: 1, member_count: 11_001 });
});

t.test("CSV with a header and quotes; a bad line changes nothing", async (t) => {
  const audience = await create("csv");
  const ok = await call("POST", `/audiences/${audience.id}/members/import`, {
    body: 'user_id,name\r\nu1,Ada\r\n"u,2",Bob\r\n\r\nu3\r\n',
    type: "text/csv",
  });
  t.same(ok.body, { audience_id: audience.id, received: 3, added: 3, member_count: 3 });
  const bad = await call("POST", `/audiences/${audience.id}/members/import`, {
    body: streamed(9000, (i) => (i === 8500 ? "has space" : `late-${i}`)),
    type: "text/csv",
  });
  t.equal(bad.status, 400);
  t.equal(bad.body.code, "validation_failed");
  t.match(bad.body.detail, /^line 8501: /);
  t.equal((await call("GET", `/audiences/${audience.id}`)).body.member_count, 3, "the first 8,500 were rolled back");
  t.equal(
    (await call("POST", `/audiences/${audience.id}/members/import`, { body: "u1", type: "application/json" })).status,
    415,
  );
  t.equal((await call("POST", "/audiences/nope/members/import", { body: "u1\n", type: "text/csv" })).status, 404);
});

t.test("add and remove one member", async (t) => {
  const audience = await create("single");
  t.equal((await call("PUT", `/audiences/${audience.id}/members/u-9`)).status, 204);
  t.equal((await call("PUT", `/audiences/${audience.id}/members/u-9`)).status, 204);
  t.equal((await call("GET", `/audiences/${audience.id}`)).body.member_count, 1);
  t.equal((await call("DELETE", `/audiences/${audience.id}/members/u-9`)).status, 204);
  t.equal((await call("GET", `/audiences/${audience.id}`)).body.member_count, 0);
  t.equal((await call("PUT", "/audiences/nope/members/u-9")).status, 404);
  t.equal((await call("PUT", `/audiences/${audience.id}/members/${encodeURIComponent("a b")}`)).status, 400);
});

t.test("broadcast scope only", async (t) => {
  t.equal((await call("GET", "/audiences", { key: ingestKey })).status, 403);
  t.equal(
    (await call("POST", "/audiences/x/members/import", { key: ingestKey, body: "u\n", type: "text/csv" })).status,
    403,
  );
  t.equal((await app.request("/api/v1/audiences")).status, 401);
});
