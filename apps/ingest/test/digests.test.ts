import { randomUUID } from "node:crypto";
import { joinDigest, seedApiKey } from "@notify/db";
import { settled } from "@notify/testing";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// Digests at ingest: the request's `digest` checked (key, window, max_items, what it may not be
// combined with), stored and carried on; an item's GET shows the digest it joined.
const { app, database } = await ingestApp(t, { maxBodyBytes: 65_536 });
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });

const request = (method: string, path: string, body: unknown, headers: Record<string, string>) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const send = (body: Record<string, unknown>) =>
  request(
    "POST",
    "/notifications",
    {
      user_id: "u1",
      category: "social",
      template_id: "comments",
      data: { who: "Ann" },
      priority: "transactional",
      ...body,
    },
    { "x-api-key": ingestKey, "idempotency-key": randomUUID() },
  );
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);
const digest = { key: "post-1", window: "30m" };

async function expectInvalid(t: Test, response: Response, field: string, message: RegExp) {
  t.equal(response.status, 400);
  const body = (await response.json()) as { code: string; errors: Array<{ field: string; message: string }> };
  t.equal(body.code, "validation_failed");
  t.match(body.errors, [{ field, message }], field);
}

t.before(async () => {
  const template = await request(
    "PUT",
    "/templates/comments",
    {
      params: ["who"],
      variants: [
        {
          channel: "email",
          locale: "en",
          subject: "<%= it.count %> comments",
          body_template: "<% for (const c of it.items) { %><%= c.who %><% } %>",
        },
      ],
    },
    { "x-api-key": admin },
  );
  if (template.status !== 201) throw new Error(`template: ${template.status} ${await template.text()}`);
});

t.test("a bad digest is a 400 naming the field, and stores nothing", async (t) => {
  const before = await rows();
  await expectInvalid(t, await send({ digest: { ...digest, window: "5s" } }), "digest.window", /10s to 7d/);
  await expectInvalid(t, await send({ digest: { ...digest, window: "8d" } }), "digest.window", /10s to 7d/);
  await expectInvalid(t, await send({ digest: { ...digest, window: "30 minutes" } }), "digest.window", /duration/);
  await expectInvalid(t, await send({ digest: { ...digest, max_items: 0 } }), "digest.max_items", /at least 1/);
  await expectInvalid(t, await send({ digest: { ...digest, max_items: 1001 } }), "digest.max_items", /at most 1000/);
  await expectInvalid(t, await send({ digest: { ...digest, key: "a b" } }), "digest.key", /printable/);
  t.equal((await send({ digest: { ...digest, every: "1h" } })).status, 400, "unknown fields refused");
  await expectInvalid(
    t,
    await send({ digest, channels: ["email"], fallback: [{ channel: "sms", when: ["failed"] }] }),
    "digest",
    /fallback/,
  );
  await expectInvalid(
    t,
    await send({ digest, send_at: new Date(Date.now() + 3_600_000).toISOString() }),
    "digest",
    /send_at/,
  );
  await expectInvalid(t, await send({ digest, throttle: { key: "k", limit: 3, per: "1h" } }), "throttle", /over_limit/);
  await expectInvalid(
    t,
    await send({ throttle: { key: "k", limit: 3, per: "1h", over_limit: "digest" } }),
    "throttle.over_limit",
    /digest/,
  );
  t.equal(await rows(), before, "nothing stored");
});

t.test("an item is stored with its digest; its GET shows the digest it joined", async (t) => {
  const response = await send({ digest });
  t.equal(response.status, 202);
  const { notification_id } = (await response.json()) as { notification_id: string };
  const [row] = await database.sql<
    { digest: unknown }[]
  >`select digest from notifications where id = ${notification_id}`;
  t.same(row?.digest, { ...digest, max_items: 50 }, "max_items defaults to 50");
  await settled(database, notification_id);
  // What the processor does with it.
  const { digestId } = await joinDigest(database, {
    notificationId: notification_id,
    clientId: "shop",
    userId: "u1",
    templateId: "comments",
    key: "post-1",
    windowMs: 1_800_000,
    maxItems: 50,
    now: new Date(),
  });
  const view = await request("GET", `/notifications/${notification_id}`, undefined, { "x-api-key": ingestKey });
  t.equal(view.status, 200);
  t.match(await view.json(), {
    status: "processing",
    channels: {},
    digest: { id: digestId, key: "post-1", status: "open", item_count: 1, notification_id: null, role: "item" },
  });
});
