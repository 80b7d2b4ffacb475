import { seedApiKey } from "@notify/db";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// GET and PUT /api/v1/users/{id}/contacts: the addresses email and SMS need.
const { app, database, lines } = await ingestApp(t, { maxBodyBytes: 4096 });
const key = await seedApiKey(database, { clientId: "shop", name: "prefs", scopes: ["contacts"] });
const readKey = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read", "ingest"] });

const get = (userId: string, apiKey = key) =>
  app.request(`/api/v1/users/${encodeURIComponent(userId)}/contacts`, { headers: { "x-api-key": apiKey } });
const put = (userId: string, body: unknown, apiKey = key) =>
  app.request(`/api/v1/users/${encodeURIComponent(userId)}/contacts`, {
    method: "PUT",
    headers: { "x-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  const body = (await response.json()) as { code: string; errors?: Array<{ field: string }> };
  t.equal(body.code, code);
  return body;
}

t.test("a user without contacts has none; PUT replaces both and returns them", async (t) => {
  const empty = await get("ada");
  t.equal(empty.status, 200);
  t.same(await empty.json(), { user_id: "ada", email: null, phone: null });

  const stored = await put("ada", { email: "ada@example.com", phone: "+447700900123" });
  t.equal(stored.status, 200);
  t.ok(stored.headers.get("last-modified"));
  t.same(await stored.json(), { user_id: "ada", email: "ada@example.com", phone: "+447700900123" });
  t.same(await (await get("ada")).json(), { user_id: "ada", email: "ada@example.com", phone: "+447700900123" });

  t.same(await (await put("ada", { email: "ada@example.org" })).json(), {
    user_id: "ada",
    email: "ada@example.org",
    phone: null,
  });
  const [row] = await database.sql`select email, phone from user_contacts where user_id = 'ada'`;
  t.same(row, { email: "ada@example.org", phone: null }, "the table routing reads");
  t.notOk(
    lines().some((line) => line.includes("ada@example.org")),
    "addresses are not logged",
  );
});

t.test("addresses are validated", async (t) => {
  const body = await expectProblem(
    t,
    await put("bob", { email: "not-an-address", phone: "555-0100", fax: "1" }),
    400,
    "validation_failed",
  );
  t.same((body.errors ?? []).map((e) => e.field).sort(), ["email", "fax", "phone"]);
  for (const phone of ["+0123456789", "+1", "+1234567890123456", "14155550123"]) {
    await expectProblem(t, await put("bob", { phone }), 400, "validation_failed");
  }
  await expectProblem(t, await put("bob", { email: `${"a".repeat(250)}@x.io` }), 400, "validation_failed");
  await expectProblem(t, await put("bob", { user_id: "carol", email: "b@example.com" }), 400, "validation_failed");
  t.same(await (await get("bob")).json(), { user_id: "bob", email: null, phone: null }, "nothing stored");
});

t.test("security: the preferences scope is required", async (t) => {
  await expectProblem(t, await app.request("/api/v1/users/ada/contacts"), 401, "unauthenticated");
  await expectProblem(t, await get("ada", readKey), 403, "insufficient_scope");
  await expectProblem(t, await put("ada", {}, readKey), 403, "insufficient_scope");
});
