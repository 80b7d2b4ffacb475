// What the floors (bench/floor-*.mjs) share: the durable accept and send on the apps' own
// statements, the pull loop and the SendGrid client.
import { acceptNotifications, moveStatus } from "@notify/db";
import { DEDUP_WINDOW_HOURS } from "@notify/ingest/bench";
import { SendgridHttpClient } from "@notify/providers";

/**
 * The least a durable accept does, with group commit: requests queue up, and up to two batches
 * of at most 512 are in flight, each ingest's own accept statement (acceptNotifications: claim
 * the idempotency key, insert the row, list it in the outbox, the same columns ingest writes), an
 * acknowledged publish of every message to `lane`, then the outbox entry deleted.
 * `accept(request)` resolves once its batch is published; `request` is `{ id, key, hash, body }`,
 * `body` the lane message without its id (the request's fields, and the template's version and
 * the deadline when the checks prepared them).
 */
export function groupCommit({ database, bus, clientId, lane }) {
  const queue = [];
  let active = 0;
  async function flush(batch) {
    const { outboxId } = await acceptNotifications(
      database,
      batch.map((p) => ({
        id: p.id,
        client_id: clientId,
        key: p.key,
        request_hash: p.hash,
        user_id: String(p.body.user_id),
        category: p.body.category,
        template_id: p.body.template_id,
        template_version: p.body.template_version ?? null,
        priority: p.body.priority,
        channels: p.body.channels ?? null,
        data: p.body.data ?? {},
        partition: 0,
        deliver_by: p.body.deliver_by ?? null,
        fallback: null,
      })),
      DEDUP_WINDOW_HOURS,
    );
    await Promise.all(batch.map((p) => bus.publish(lane, { notification_id: p.id, ...p.body }, p.id)));
    for (const p of batch) p.resolve();
    await database.sql`delete from publish_outbox where id = ${outboxId}::bigint`;
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
  return (request) =>
    new Promise((resolve, reject) => {
      queue.push({ ...request, resolve, reject });
      pump();
    });
}

/**
 * Pulls a durable consumer and handles up to `concurrency` messages at once, each acked after
 * `handle(message.json())` (nak'ed, to come back in a second, if it throws). Runs for ever.
 */
export async function consume(bus, { stream, durable, concurrency, prefetch = concurrency }, handle) {
  const consumer = await bus.js.consumers.get(stream, durable);
  const messages = await consumer.consume({ max_messages: prefetch });
  let slots = concurrency;
  let wake;
  for await (const msg of messages) {
    while (slots === 0) await new Promise((resolve) => (wake = resolve));
    slots--;
    handle(msg.json())
      .then(
        () => msg.ack(),
        (error) => {
          console.error(error);
          msg.nak(1000);
        },
      )
      .finally(() => {
        slots++;
        wake?.();
      });
  }
}

const encoder = new TextEncoder();

/**
 * The least a durable email send does, per work item `{ notification_id, to, subject, html }`:
 * claim the send guard (KV create), send with @sendgrid/mail, record the guard as sent, and
 * mark the channel delivered with the worker's own statement (moveStatus: the attempt's line,
 * the status, its history row; the moves of one event-loop iteration in one statement, as the
 * worker's are). With `text(html)`, the mail also carries its text/plain alternative and the
 * item's category, as the service's do.
 */
export function emailDelivery({ sql, guard, mail, text }) {
  const markDelivered = ({ id, providerId }) =>
    moveStatus(sql, { notification_id: id, channel: "email" }, "delivered", {
      provider: "sendgrid",
      providerId,
      reason: null,
      attempts: 1,
      attempt: { attempt: 1, outcome: "accepted", provider: "sendgrid", providerId, error: null },
    });
  return async (item) => {
    const key = `${item.notification_id}.email`;
    await guard.create(key, encoder.encode(JSON.stringify({ state: "sending", at: Date.now() })));
    const [answer] = await mail.send({
      to: item.to,
      from: "floor@example.com",
      subject: item.subject,
      html: item.html,
      ...(text ? { text: text(item.html), categories: [item.category] } : {}),
      customArgs: { notification_id: item.notification_id, channel: "email" },
    });
    const providerId = answer.headers["x-message-id"];
    await guard.put(key, encoder.encode(JSON.stringify({ state: "sent", provider_id: providerId })));
    await markDelivered({ id: item.notification_id, providerId });
  };
}

/**
 * A @sendgrid/mail service speaking to `baseUrl` (a sandbox) with `apiKey`, through the same
 * client as the service's provider (@sendgrid/client's request sent with undici, connections of
 * its own): the least a send costs with the library.
 */
export async function sendgridMail(apiKey, baseUrl) {
  const { MailService } = await import("@sendgrid/mail");
  const client = new SendgridHttpClient({ connectMs: 10_000, timeoutMs: 10_000 });
  client.setApiKey(apiKey);
  client.setDefaultRequest("baseUrl", baseUrl);
  const mail = new MailService();
  mail.setClient(client);
  return mail;
}
