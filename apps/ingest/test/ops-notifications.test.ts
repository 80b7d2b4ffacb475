import { randomUUID } from "node:crypto";
import { AppError, validate } from "@notify/core";
import { seedApiKey, seedTemplate } from "@notify/db";

import { settled } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { OpsNotificationsQuery } from "../src/ops/schemas.js";
import { ingestApp } from "./support.js";

// The operator's notification routes (scope admin, across clients): search by id, user or
// Idempotency-Key, and one notification whole with whose it is; the timeline's accepted and
// receipt entries and the trace id, on the client's route too.
const { app, database } = await ingestApp(t);
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const shop = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read"] });
const bank = await seedApiKey(database, { clientId: "bank", name: "bank", scopes: ["ingest", "read"] });
const operator = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const user = `user-${randomUUID().slice(0, 8)}`;

const post = async (key: string, idempotencyKey: string, userId = user) => {
  const response = await app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify({
      user_id: userId,
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
    }),
  });
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  await settled(database, id);
  return id;
};
const get = async (path: string, key = operator) => {
  const response = await app.request(`/api/v1${path}`, { headers: { "x-api-key": key } });
  // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, checked by t.match and t.same
  return { status: response.status, type: response.headers.get("content-type"), body: (await response.json()) as any };
};
const search = (query: Record<string, string>, key = operator) =>
  get(`/ops/notifications?${new URLSearchParams(query)}`, key);

const shopKey = randomUUID();
const shopId = await post(shop, shopKey);
const bankId = await post(bank, randomUUID());

t.test("search across clients: by user, by id, by Idempotency-Key with its client; newest first", async (t) => {
  const byUser = await search({ user_id: user });
  t.equal(byUser.status, 200);
  t.same(
    byUser.body.data.map((n: { notification_id: string; client_id: string }) => [n.notification_id, n.client_id]),
    [
      [bankId, "bank"],
      [shopId, "shop"],
    ],
    "both clients' notifications to the user, newest first, with whose they are",
  );
  t.match(byUser.body.data[0], { user_id: user, status: "accepted", channels: {}, trace_id: null });
  t.notOk("timeline" in byUser.body.data[0], "no timeline in a search result");
  t.same(
    (await search({ user_id: user, client_id: "shop" })).body.data.map(
      (n: { notification_id: string }) => n.notification_id,
    ),
    [shopId],
  );
  t.same(
    (await search({ notification_id: bankId })).body.data.map((n: { client_id: string }) => n.client_id),
    ["bank"],
  );
  t.same((await search({ notification_id: bankId, client_id: "shop" })).body.data, [], "every criterion must match");
  t.same((await search({ user_id: user, limit: "1" })).body.data.length, 1);

  const byKey = await search({ idempotency_key: shopKey, client_id: "shop" });
  t.same(
    byKey.body.data.map((n: { notification_id: string }) => n.notification_id),
    [shopId],
    "through the idempotency guard",
  );
  t.same((await search({ idempotency_key: shopKey, client_id: "bank" })).body.data, [], "a key is per client");
  // Past the guard's 24 h the key is only on the notification itself: found with the user.
  await database.sql`delete from idempotency_keys where client_id = 'shop' and key = ${shopKey}`;
  t.same((await search({ idempotency_key: shopKey, client_id: "shop" })).body.data, [], "not in the guard any more");
  t.same(
    (await search({ idempotency_key: shopKey, client_id: "shop", user_id: user })).body.data.map(
      (n: { notification_id: string }) => n.notification_id,
    ),
    [shopId],
    "through notifications.dedup_key with the user",
  );
});

t.test("bad queries are 400 problems naming the field", async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{}, "notification_id"],
    [{ client_id: "shop" }, "notification_id"],
    [{ idempotency_key: shopKey }, "client_id"],
    [{ user_id: user, limit: "0" }, "limit"],
    [{ user_id: user, limit: "ten" }, "limit"],
    [{ user_id: "" }, "user_id"],
    [{ user_id: "x".repeat(257) }, "user_id"],
    [{ user_id: user, nope: "1" }, "nope"],
  ];
  for (const [query, field] of cases) {
    const answer = await search(query);
    t.equal(answer.status, 400, JSON.stringify(query));
    t.equal(answer.type, "application/problem+json");
    t.match(answer.body, { code: "validation_failed" });
    t.ok(
      answer.body.errors.some((e: { field: string }) => e.field === field),
      `${JSON.stringify(query)} names ${field}: ${JSON.stringify(answer.body.errors)}`,
    );
  }
  t.equal((await search({ user_id: user, limit: "5000" })).status, 200, "a large limit is clamped");
});

t.test("the query validator: any query either passes with a criterion or names its fields", async (t) => {
  const value = fc.oneof(fc.constant(""), fc.string({ maxLength: 6 }), fc.stringMatching(/^\d{1,4}$/));
  const key = fc.constantFrom("notification_id", "user_id", "client_id", "idempotency_key", "limit", "other");
  fc.assert(
    fc.property(fc.dictionary(key, value), (query) => {
      try {
        const q = validate(OpsNotificationsQuery, query);
        return (
          (q.notification_id !== undefined || q.user_id !== undefined || q.idempotency_key !== undefined) &&
          (q.idempotency_key === undefined || q.client_id !== undefined) &&
          q.limit >= 1 &&
          q.limit <= 200
        );
      } catch (error) {
        if (!(error instanceof AppError) || error.code !== "validation_failed") return false;
        const fields = error.fields ?? [];
        return (
          fields.length > 0 &&
          fields.every((f) => [...Object.keys(query), "notification_id", "client_id"].includes(f.field))
        );
      }
    }),
  );
  t.pass();
});

t.test("one notification of any client, as its client reads it, with client_id", async (t) => {
  const answer = await get(`/ops/notifications/${bankId}`);
  t.equal(answer.status, 200);
  const own = await get(`/notifications/${bankId}`, bank);
  t.same(answer.body, { ...own.body, client_id: "bank" }, "exactly the client's view plus client_id");
  t.match(answer.body.timeline, [{ event: "accepted", at: answer.body.created_at }]);
  const missing = await get(`/ops/notifications/${randomUUID()}`);
  t.equal(missing.status, 404);
  t.match(missing.body, { code: "not_found" });
});

t.test("the routes need the operator scope", async (t) => {
  for (const path of [`/ops/notifications?user_id=${user}`, `/ops/notifications/${shopId}`]) {
    const answer = await get(path, shop);
    t.equal(answer.status, 403, path);
    t.match(answer.body, { code: "insufficient_scope" });
  }
});

t.test("timeline: accepted first, receipts bound to the channel's sends; the trace id", async (t) => {
  const id = await post(shop, randomUUID(), `receipts-${randomUUID().slice(0, 8)}`);
  await database.sql`insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts)
    values (${id}, 'email', 'delivered', 'sendgrid', 'm-2', 2), (${id}, 'sms', 'bounced', 'plivo', 'p-1', 1)`;
  // The first attempt went to another message id: its receipt is shown too.
  await database.sql`insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, at)
    values (${id}, 'email', 1, 'accepted', 'sendgrid', 'm-1', now() - interval '3 minutes'),
           (${id}, 'email', 2, 'accepted', 'sendgrid', 'm-2', now() - interval '2 minutes')`;
  await database.sql`insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, received_at, applied_at)
    values ('sendgrid', 'e-1', 'm-1', 'none', null, ${database.sql.json({ event: "deferred" })}, now() - interval '150 seconds', now()),
           ('sendgrid', 'e-2', 'm-2', 'delivered', null, ${database.sql.json({ event: "delivered" })}, now() - interval '1 minute', now()),
           ('plivo', 'p-1:undelivered', 'p-1', 'bounced', '300', ${database.sql.json({ report: { Status: "undelivered" } })}, now() - interval '30 seconds', now()),
           ('sendgrid', 'e-9', 'm-other', 'delivered', null, ${database.sql.json({ event: "delivered" })}, now(), now())`;
  const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  await database.sql`update notifications set trace_parent = ${`00-${trace}-00f067aa0ba902b7-01`} where id = ${id}`;

  for (const [path, key] of [
    [`/notifications/${id}`, shop],
    [`/ops/notifications/${id}`, operator],
  ] as const) {
    const { status, body } = await get(path, key);
    t.equal(status, 200);
    t.equal(body.trace_id, trace, `${path}: the trace id of the stored traceparent`);
    const events = body.timeline.map((e: { event: string }) => e.event);
    t.equal(events[0], "accepted", "accepted first");
    t.equal(body.timeline[0].at, body.created_at);
    const receipts = body.timeline.filter((e: { event: string }) => e.event === "receipt");
    t.same(
      receipts.map((r: Record<string, unknown>) => ({ ...r, at: undefined })),
      [
        {
          event: "receipt",
          at: undefined,
          channel: "email",
          provider: "sendgrid",
          receipt: "deferred",
          provider_id: "m-1",
        },
        {
          event: "receipt",
          at: undefined,
          channel: "email",
          provider: "sendgrid",
          receipt: "delivered",
          provider_id: "m-2",
        },
        {
          event: "receipt",
          at: undefined,
          channel: "sms",
          provider: "plivo",
          receipt: "undelivered",
          provider_id: "p-1",
          reason: "300",
        },
      ],
      "each receipt of its sends, oldest first; none of another message",
    );
    const times = body.timeline.map((e: { at: string }) => Date.parse(e.at));
    t.same(
      times.slice(1),
      [...times.slice(1)].sort((a: number, b: number) => a - b),
      "oldest first",
    );
  }
  const found = await search({ notification_id: id });
  t.equal(found.body.data[0].trace_id, trace, "the search shows it too");
  await database.sql`update notifications set trace_parent = 'garbage' where id = ${id}`;
  t.equal((await get(`/notifications/${id}`, shop)).body.trace_id, null, "a malformed traceparent has none");
});
