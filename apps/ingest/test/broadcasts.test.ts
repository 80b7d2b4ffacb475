import { randomUUID } from "node:crypto";
import { seedApiKey, seedTemplate } from "@notify/db";
import t from "tap";
import { ingestApp } from "./support.js";

const { app, database } = await ingestApp(t);
const admin = await seedApiKey(database, { clientId: "shop", name: "admin", scopes: ["admin"] });
const otherAdmin = await seedApiKey(database, { clientId: "bank", name: "bank admin", scopes: ["admin"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });
await seedTemplate(database, {
  id: "promo",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hi <%= it.name %>" }],
});
await database.sql`insert into audiences (id, name) values ('aud-1', 'one')`;
await database.sql`insert into audience_members (audience_id, user_id) select 'aud-1', 'u-' || n from generate_series(1, 25) n`;

/** A broadcast's answer, or a problem. */
interface Answer {
  broadcast_id: string;
  status: string;
  code?: string;
  finished_at?: string | null;
  [field: string]: unknown;
}

const body = { audience_id: "aud-1", category: "deals", template_id: "promo", data: { name: "you" } };

const call = async (
  method: string,
  path: string,
  init: { body?: unknown; key?: string; idem?: string | null } = {},
) => {
  const headers: Record<string, string> = { "x-api-key": init.key ?? admin };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  if (init.idem !== null && method === "POST" && path === "/broadcasts")
    headers["idempotency-key"] = init.idem ?? randomUUID();
  const response = await app.request(`/api/v1${path}`, {
    method,
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Answer };
};

t.test("accepted with its audience's size; a repeat is replayed, another body refused", async (t) => {
  const idem = randomUUID();
  const first = await call("POST", "/broadcasts", { body, idem });
  t.equal(first.status, 202);
  t.match(first.body, { status: "expanding", total: 25 });
  t.equal(first.headers.get("location"), `/api/v1/broadcasts/${first.body.broadcast_id}`);
  const again = await call("POST", "/broadcasts", { body, idem });
  t.equal(again.status, 200);
  t.equal(again.headers.get("idempotent-replayed"), "true");
  t.equal(again.body.broadcast_id, first.body.broadcast_id);
  const reused = await call("POST", "/broadcasts", { body: { ...body, category: "other" }, idem });
  t.equal(reused.status, 422);
  t.equal(reused.body.code, "idempotency_key_reused");
  const [count] = await database.sql`select count(*)::int as n from broadcasts`;
  t.equal(count?.n, 1);
});

t.test("bad requests leave nothing behind", async (t) => {
  const missingKey = await call("POST", "/broadcasts", { body, idem: null });
  t.equal(missingKey.body.code, "idempotency_key_missing");
  t.equal(
    (await call("POST", "/broadcasts", { body: { ...body, audience_id: "nope" } })).body.code,
    "validation_failed",
  );
  t.equal(
    (await call("POST", "/broadcasts", { body: { ...body, template_id: "nope" } })).body.code,
    "unknown_template",
  );
  t.equal((await call("POST", "/broadcasts", { body: { ...body, data: {} } })).body.code, "template_data_invalid");
  t.equal((await call("POST", "/broadcasts", { body: { ...body, priority: "transactional" } })).status, 400);
  t.equal((await call("POST", "/broadcasts", { body: { ...body, channels: ["fax"] } })).status, 400);
  const [count] = await database.sql`select count(*)::int as n from broadcasts`;
  t.equal(count?.n, 1);
});

t.test("progress counts each recipient once by its best outcome; cancel stops it", async (t) => {
  const created = await call("POST", "/broadcasts", { body: { ...body, channels: ["email", "sms"] } });
  const id = created.body.broadcast_id as string;
  // What the expander and the workers would have written for five recipients.
  const outcomes: Array<[string, string]> = [
    ["delivered", "failed"],
    ["suppressed", "suppressed"],
    ["failed", "suppressed"],
    ["bounced", "pending"],
    ["pending", "pending"],
  ];
  for (const [i, [email, sms]] of outcomes.entries()) {
    const nid = randomUUID();
    await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
      values (${nid}, 'shop', ${`u-${i + 1}`}, 'deals', 'promo', 'promotional', '{}', ${nid}, 'h', 0)`;
    await database.sql`insert into broadcast_recipients values (${id}, ${`u-${i + 1}`}, ${nid})`;
    await database.sql`insert into notification_channels (notification_id, channel, status)
      values (${nid}, 'email', ${email}), (${nid}, 'sms', ${sms})`;
  }
  await database.sql`update broadcasts set expanded = 5, cursor = 'u-5' where id = ${id}`;
  const progress = await call("GET", `/broadcasts/${id}`);
  t.match(progress.body, {
    broadcast_id: id,
    audience_id: "aud-1",
    status: "expanding",
    total: 25,
    expanded: 5,
    delivered: 1,
    failed: 2,
    suppressed: 1,
    finished_at: null,
  });
  const cancelled = await call("POST", `/broadcasts/${id}/cancel`);
  t.equal(cancelled.status, 200);
  t.equal(cancelled.body.status, "cancelled");
  t.ok(cancelled.body.finished_at);
  t.equal((await call("POST", `/broadcasts/${id}/cancel`)).body.finished_at, cancelled.body.finished_at, "idempotent");
});

t.test("broadcast scope; a client never sees another's broadcast", async (t) => {
  const created = await call("POST", "/broadcasts", { body });
  const id = created.body.broadcast_id as string;
  t.equal((await call("GET", `/broadcasts/${id}`, { key: otherAdmin })).status, 404);
  t.equal((await call("POST", `/broadcasts/${id}/cancel`, { key: otherAdmin })).status, 404);
  t.equal((await call("GET", `/broadcasts/${id}`)).body.status, "expanding");
  t.equal((await call("POST", "/broadcasts", { body, key: ingestKey })).status, 403);
  t.equal((await call("GET", `/broadcasts/${id}`, { key: ingestKey })).status, 403);
  t.equal((await call("GET", "/broadcasts/nope")).status, 404);
});
