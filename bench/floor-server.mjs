// The least a durable ingest has to do, on bare Hono, as the second reference of
// bench/ingest.mjs: read the JSON body, claim the idempotency key and insert the row in one
// batched statement (group commit, the same tables and indexes as ingest), publish it to
// JetStream and wait for the ack, answer 202, and settle the outbox row. No authentication,
// validation, rate limit, logging or metrics: what is left is the cost of the durability itself.
import { createHash, randomUUID } from "node:crypto";
import { serve } from "@hono/node-server";
import { connectBus } from "@notify/bus";
import { createDb } from "@notify/db";
import { Hono } from "hono";

const database = createDb({ url: process.env.DATABASE_URL, max: 4 });
const bus = await connectBus({
  servers: process.env.NATS_URL,
  name: "notify-bench-floor",
  namespace: process.env.NATS_NAMESPACE,
  partitions: Number(process.env.LANE_PARTITIONS ?? 8),
});
const subject = bus.subjects.lane("transactional", 0);
const queue = [];
let active = 0;

async function flush(batch) {
  const column = (pick) => batch.map(pick);
  const rows = await database.sql`
    with input as (
      select * from unnest(${column((p) => p.id)}::text[], ${column((p) => p.key)}::text[],
        ${column((p) => p.hash)}::text[], ${column((p) => String(p.body.user_id))}::text[],
        ${column((p) => JSON.stringify(p.body.data ?? {}))}::text[]) as i(id, key, request_hash, user_id, data)
    ),
    claimed as (
      insert into idempotency_keys (client_id, key, request_hash, notification_id, created_at)
      select 'bench', key, request_hash, id, now() from input on conflict do nothing returning notification_id
    ),
    inserted as (
      insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
      select id, 'bench', user_id, 'account', 'welcome', 'transactional', data::jsonb, key, request_hash, 0
      from input where id in (select notification_id from claimed) returning id
    ),
    outbox as (insert into publish_outbox (notification_ids) select array_agg(id) from inserted returning id)
    select (select id from outbox)::text as outbox_id`;
  await Promise.all(batch.map((p) => bus.publish(subject, { notification_id: p.id, ...p.body }, p.id)));
  for (const p of batch) p.resolve();
  await database.sql`delete from publish_outbox where id = ${rows[0].outbox_id}::bigint`;
}

function pump() {
  while (active < 2 && queue.length > 0) {
    const batch = queue.splice(0, 512);
    active++;
    flush(batch)
      .catch((error) => {
        for (const p of batch) p.reject(error);
      })
      .finally(() => {
        active--;
        pump();
      });
  }
}

const app = new Hono();
app.post("/", async (c) => {
  const body = await c.req.json();
  const id = randomUUID();
  const hash = createHash("sha256").update(JSON.stringify(body)).digest("hex");
  await new Promise((resolve, reject) => {
    queue.push({ id, key: c.req.header("idempotency-key"), hash, body, resolve, reject });
    pump();
  });
  return c.json({ notification_id: id, status: "accepted" }, 202);
});
process.on("SIGTERM", () => process.exit(0));
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: "127.0.0.1" }, () => process.send?.("ready"));
