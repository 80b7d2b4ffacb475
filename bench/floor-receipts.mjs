// The least a receipts service has to do per provider post, on bare Hono, as the reference of
// bench/receipts.mjs: verify the signature (SendGrid's ECDSA over timestamp + raw body, Plivo's
// V3 HMAC), parse, and in one transaction per post (as apps/receipts) store the new events in
// provider_receipts (deduplicated by event id), move their channels forward with a history row
// and mark the events applied: one set-based statement for the insert and one for the rest,
// whatever the number of events. No validation, repair, throttle, logging or metrics.
import { createHmac, timingSafeEqual, verify } from "node:crypto";
import { serve } from "@hono/node-server";
import { statusesMovableTo } from "@notify/core";
import { createDb } from "@notify/db";
import { sendgridPublicKey } from "@notify/providers";
import { Hono } from "hono";

const { sql } = createDb({ url: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 5) });
const publicKey = sendgridPublicKey(process.env.SENDGRID_WEBHOOK_PUBLIC_KEY);
const plivoToken = process.env.PLIVO_AUTH_TOKEN;
// The bench posts final "delivered" events only; anything else is stored for the record.
const MOVABLE = statusesMovableTo("delivered");
const statusOf = (event) => (event === "delivered" ? "delivered" : "none");

/** Stores the events of one post and applies the new ones; answers how many were new. */
function record(provider, events) {
  return sql.begin(async (tx) => {
    const stored = await tx`
      insert into provider_receipts (provider, event_id, provider_id, status, payload)
      select ${provider}, event_id, provider_id, status, payload::jsonb
      from unnest(${events.map((e) => e.eventId)}::text[], ${events.map((e) => e.providerId)}::text[],
        ${events.map((e) => e.status)}::text[], ${events.map((e) => JSON.stringify(e.payload))}::text[])
        as i(event_id, provider_id, status, payload)
      on conflict do nothing
      returning event_id, provider_id, status`;
    if (stored.length === 0) return 0;
    await tx`
      with input as (
        select * from unnest(${stored.map((r) => r.event_id)}::text[], ${stored.map((r) => r.provider_id)}::text[],
          ${stored.map((r) => r.status)}::text[]) as i(event_id, provider_id, status)
      ),
      moved as (
        update notification_channels c set status = i.status, reason = null, updated_at = now()
        from input i
        where c.provider = ${provider} and c.provider_id = i.provider_id and i.status <> 'none'
          and c.status = any(${MOVABLE})
        returning c.notification_id, c.channel, c.status, c.reason, c.attempts, c.provider_id, c.user_id
      ),
      history as (
        insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, user_id)
        select notification_id, channel, status, reason, attempts, provider_id, user_id from moved
      )
      update provider_receipts r set applied_at = now()
      from input i
      where r.provider = ${provider} and r.event_id = i.event_id
        and exists (select 1 from notification_channels c where c.provider = r.provider and c.provider_id = i.provider_id)`;
    return stored.length;
  });
}

const app = new Hono();
app.post("/webhooks/sendgrid", async (c) => {
  const timestamp = c.req.header("x-twilio-email-event-webhook-timestamp") ?? "";
  const body = Buffer.from(await c.req.arrayBuffer());
  const signature = Buffer.from(c.req.header("x-twilio-email-event-webhook-signature") ?? "", "base64");
  const signed = Buffer.concat([Buffer.from(timestamp), body]);
  if (!verify("sha256", signed, { key: publicKey, dsaEncoding: "der" }, signature)) return c.body(null, 401);
  const events = JSON.parse(body.toString("utf8")).map((e) => ({
    eventId: e.sg_event_id,
    providerId: e.sg_message_id.split(".")[0],
    status: statusOf(e.event),
    payload: e,
  }));
  return c.json({ events: events.length, stored: await record("sendgrid", events) });
});

// V3: HMAC-SHA256 over the URL with its sorted query, "." and the sorted "namevalue" pairs,
// "." and the nonce (every parameter is single-valued in a delivery report).
app.post("/webhooks/plivo", async (c) => {
  const params = Object.fromEntries(new URLSearchParams(await c.req.text()));
  const url = new URL(c.req.url);
  const query = [...url.searchParams].map(([k, v]) => `${k}=${v}`).sort();
  const form = Object.keys(params)
    .sort()
    .map((k) => `${k}${params[k]}`);
  const base = `${url.origin}${url.pathname}?${query.join("&")}.${form.join("")}.${c.req.header("x-plivo-signature-v3-nonce")}`;
  const expected = createHmac("sha256", plivoToken).update(base).digest();
  const given = Buffer.from(c.req.header("x-plivo-signature-v3") ?? "", "base64");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return c.body(null, 401);
  const notificationId = url.searchParams.get("notification_id");
  await record("plivo", [
    {
      eventId: `${params.MessageUUID}:${params.Status}`,
      providerId: params.MessageUUID,
      status: statusOf(params.Status),
      payload: { report: params, notification_id: notificationId, channel: "sms" },
    },
  ]);
  return c.body(null, 200);
});
process.on("SIGTERM", () => process.exit(0));
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: "127.0.0.1" }, () => process.send?.("ready"));
