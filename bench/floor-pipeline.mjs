// The least a durable email pipeline has to do, in one process, as the floor of bench/e2e.mjs:
// the same libraries, tables, streams and durable consumers as the service, and nothing else.
//   accept:  read the JSON; claim the idempotency key, insert the row and the outbox entry with
//            ingest's own batched statement (group commit); publish the lane message, acknowledged; answer 202;
//            delete the outbox entry.
//   route:   pull the lane message; insert the email channel row (the rows of one event-loop
//            iteration in one statement, as the processor does); publish the work item,
//            acknowledged; ack.
//   deliver: pull the work item; claim the send guard (KV create); send with @sendgrid/mail to the
//            sandbox; record the guard as sent; record the attempt and mark the channel
//            delivered with its history row (the worker's statement, batched likewise); ack.
//   receipt: verify the Event Webhook batch's ECDSA signature; store every event and apply the
//            delivered ones, in one statement.
// No authentication, validation, preferences, templates, rate limits, breakers, retries, logging
// or metrics: what is left is the cost of the durable work itself.
// FLOOR_CHECKS=1 adds what each stage must also do (bench/floor-checks.mjs), with the project's
// own functions: accept checks the key, its bucket, the Idempotency-Key, the body and the
// template's parameters and publishes the whole lane message; route validates it, reads the
// user's contacts and preferences, decides the policy and renders the template; deliver
// validates the work item, reads the channel's row, takes a token of the shared bucket and sends
// the text/plain alternative too. The gap from there to the service is its own plumbing.
// FLOOR_STAGES (accept,route,deliver,receipt) picks the stages this process runs: bench/e2e.mjs
// also runs the four in four processes, each with its own connections, as the service's apps
// are deployed, to measure what that split costs by itself.
import { createHash, createPublicKey, randomUUID, verify } from "node:crypto";
import { serve } from "@hono/node-server";
import { applyTopology, connectBus } from "@notify/bus";
import { createDb, perIteration, unnestColumns } from "@notify/db";
import { htmlToText } from "@notify/providers";
import { Hono } from "hono";
import { requestChecks, routeChecks, sendChecks } from "./floor-checks.mjs";
import { consume, emailDelivery, groupCommit, sendgridMail } from "./floor-lib.mjs";

const env = process.env;
const database = createDb({ url: env.DATABASE_URL, max: 8 });
const sql = database.sql;
const bus = await connectBus({
  servers: env.NATS_URL,
  name: "notify-bench-floor-pipeline",
  namespace: env.NATS_NAMESPACE,
  partitions: 1,
});
await applyTopology(bus);
const CONCURRENCY = Number(env.FLOOR_CONCURRENCY ?? 32);
const STAGES = new Set((env.FLOOR_STAGES ?? "accept,route,deliver,receipt").split(","));
const CHECKS = env.FLOOR_CHECKS === "1";
const app = new Hono();

if (STAGES.has("accept")) {
  const accept = groupCommit({ database, bus, clientId: "floor", lane: bus.subjects.lane("transactional", 0) });
  const check = CHECKS && requestChecks(env.FLOOR_API_KEY ?? "", bus);
  app.post("/api/v1/notifications", async (c) => {
    if (check) {
      const checked = await check(c);
      if (checked instanceof Response) return checked;
      // The lane message the processor reads, as ingest publishes it.
      const { notification_id, ...message } = checked.message;
      await accept({ id: notification_id, key: checked.key, hash: checked.hash, body: message });
      return checked.answer(c);
    }
    const body = await c.req.json();
    const id = randomUUID();
    const hash = createHash("sha256").update(JSON.stringify(body)).digest("hex");
    await accept({ id, key: c.req.header("idempotency-key") ?? id, hash, body });
    return c.json({ notification_id: id, status: "accepted" }, 202);
  });
}

const pull = (stream, durable) => ({ stream, durable, concurrency: CONCURRENCY });
const insertChannel = perIteration(async (channels) => {
  await sql`insert into notification_channels (notification_id, channel, status, user_id)
    select id, 'email', 'pending', user_id from ${unnestColumns(sql, "n", {
      id: ["text", channels.map((c) => c.id)],
      user_id: ["text", channels.map((c) => c.user_id)],
    })}`;
  return channels.map(() => undefined);
});
if (STAGES.has("route")) {
  const route = CHECKS && routeChecks(database);
  void consume(bus, pull(bus.streams.lane("transactional"), "processor-transactional-p0"), async (message) => {
    const email = route ? await route(message) : { to: `${message.user_id}@example.com`, name: message.data?.name };
    if (email === null) return;
    await insertChannel({ id: message.notification_id, user_id: message.user_id });
    const item = route
      ? {
          notification_id: message.notification_id,
          channel: "email",
          priority: message.priority,
          user_id: message.user_id,
          category: message.category,
          ...email,
          attempt: 0,
        }
      : { notification_id: message.notification_id, ...email };
    await bus.publish(bus.subjects.work("email", "transactional"), item, `${message.notification_id}:email`);
  });
}

if (STAGES.has("deliver")) {
  const guard = await bus.kv("notify_send_guard");
  const mail = await sendgridMail(env.SENDGRID_API_KEY, env.SENDGRID_BASE_URL);
  const deliver = emailDelivery({ sql, guard, mail, ...(CHECKS ? { text: htmlToText } : {}) });
  const admit = CHECKS && (await sendChecks({ sql, bus }));
  void consume(bus, pull(bus.streams.work, "worker-email-transactional"), async (item) => {
    if (!admit) return deliver({ ...item, subject: "Welcome", html: `<p>Hello ${item.name}</p>` });
    if (await admit(item)) await deliver({ ...item, html: item.body });
  });
}

const webhookKey =
  STAGES.has("receipt") &&
  createPublicKey({ key: Buffer.from(env.SENDGRID_WEBHOOK_PUBLIC_KEY, "base64"), format: "der", type: "spki" });
if (STAGES.has("receipt"))
  app.post("/webhooks/sendgrid", async (c) => {
    const body = new Uint8Array(await c.req.arrayBuffer());
    const timestamp = c.req.header("x-twilio-email-event-webhook-timestamp") ?? "";
    const signature = Buffer.from(c.req.header("x-twilio-email-event-webhook-signature") ?? "", "base64");
    const signed = Buffer.concat([Buffer.from(timestamp), body]);
    if (!verify("sha256", signed, { key: webhookKey, dsaEncoding: "der" }, signature)) return c.body(null, 401);
    const events = JSON.parse(Buffer.from(body).toString("utf8"));
    const text = (pick) => ["text", events.map(pick)];
    const input = unnestColumns(sql, "i", {
      event_id: text((e) => e.sg_event_id),
      provider_id: text((e) => e.sg_message_id.split(".")[0]),
      status: text((e) => e.event),
      payload: text((e) => JSON.stringify(e)),
    });
    await sql`
    with input as (select * from ${input}),
    stored as (
      insert into provider_receipts (provider, event_id, provider_id, status, payload, applied_at)
      select 'sendgrid', event_id, provider_id, status, payload::jsonb, now() from input
      on conflict do nothing returning provider_id, status
    )
    update notification_channels set updated_at = now()
    where provider = 'sendgrid' and provider_id in (select provider_id from stored where status = 'delivered')`;
    return c.body(null, 200);
  });

process.on("SIGTERM", () => process.exit(0));
// Its bench's end, however it ends (a SIGKILL included), closes the IPC channel: a floor never
// outlives the bench that forked it.
process.on("disconnect", () => process.exit(0));
if (STAGES.has("accept") || STAGES.has("receipt"))
  serve({ fetch: app.fetch, port: Number(env.PORT), hostname: "127.0.0.1" }, () => process.send?.("ready"));
else process.send?.("ready");
