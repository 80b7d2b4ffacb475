import { randomUUID } from "node:crypto";
import { readGuard } from "@notify/bus";
import { guardKey } from "@notify/core";
import { moveStatus, seedApiKey, seedTemplate } from "@notify/db";
import { freshBus, settled } from "@notify/testing";
import t from "tap";
import { cancelResponder, ingestApp } from "./support.js";

// POST /api/v1/notifications/{id}/cancel through the API, with the processor's responder in this
// process (no processor routes here: the tests write channel rows as routing would).
const { app, database, deps, bus } = await ingestApp(t);
await cancelResponder(t, deps);
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const key = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read", "webhooks"] });
const other = await seedApiKey(database, { clientId: "blog", name: "blog", scopes: ["ingest", "read"] });

async function send(): Promise<string> {
  const posted = await app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "u1",
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
    }),
  });
  const { notification_id: id } = (await posted.json()) as { notification_id: string };
  await settled(database, id);
  return id;
}
/** The channel rows routing would write: email queued, push deferred (with its timer), sms suppressed. */
async function route(id: string) {
  await database.sql`insert into deferred_notifications (notification_id, user_id, due_at)
    values (${id}, 'u1', now() + interval '1 hour')`;
  await database.sql`insert into notification_channels (notification_id, channel, status, reason, next_attempt_at)
    values (${id}, 'email', 'pending', null, null), (${id}, 'push', 'deferred', 'quiet_hours', now() + interval '1 hour'),
           (${id}, 'sms', 'suppressed', 'opted_out', null)`;
}
const cancel = (id: string, apiKey = key, target = app) =>
  target.request(`/api/v1/notifications/${id}/cancel`, { method: "POST", headers: { "x-api-key": apiKey } });

t.test(
  "waiting channels are canceled; the answer is the notification as GET shows it, and what became of each",
  async (t) => {
    const id = await send();
    await route(id);
    const answer = await cancel(id);
    t.equal(answer.status, 200);
    const body = (await answer.json()) as Record<string, unknown>;
    t.match(body, {
      notification_id: id,
      status: "canceled",
      channels: {
        email: { status: "canceled", reason: "canceled_by_client", next_attempt_at: null },
        push: { status: "canceled", reason: "canceled_by_client", next_attempt_at: null },
        sms: { status: "suppressed", reason: "opted_out" },
      },
      cancel: {
        email: { result: "canceled", why: null },
        push: { result: "canceled", why: null },
        sms: { result: "not_canceled", why: "already suppressed" },
      },
    });
    const got = (await (
      await app.request(`/api/v1/notifications/${id}`, { headers: { "x-api-key": key } })
    ).json()) as {
      timeline: Array<{ event: string; channel?: string; status?: string; reason?: string }>;
    };
    const { cancel: _outcome, ...view } = body;
    t.same(view, got, "the rest is GET's view");
    t.match(
      got.timeline.filter((e) => e.status === "canceled"),
      [
        { event: "status", channel: "email", reason: /^canceled_by_client: key / },
        { event: "status", channel: "push", reason: /^canceled_by_client: key / },
      ],
      "the timeline shows each cancel",
    );
    t.equal((await database.sql`select 1 from deferred_notifications where notification_id = ${id}`).length, 0);
    t.match((await readGuard(await bus.kv("notify_send_guard"), guardKey(id, "email")))?.value, { state: "canceled" });

    const again = await cancel(id);
    t.equal(again.status, 200, "a second cancel answers 200");
    t.match(await again.json(), {
      status: "canceled",
      cancel: { email: { result: "already_canceled" }, push: { result: "already_canceled" } },
    });
  },
);

t.test("a channel already delivered stays delivered; the notification stays completed", async (t) => {
  const id = await send();
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  await moveStatus(database.sql, { notification_id: id, channel: "email" }, "delivered", {
    provider: "sendgrid",
    providerId: "sg-1",
    attempts: 1,
  });
  const answer = await cancel(id);
  t.equal(answer.status, 200);
  t.match(await answer.json(), {
    status: "completed",
    channels: { email: { status: "delivered", provider_id: "sg-1" } },
    cancel: { email: { result: "not_canceled", why: "already delivered" } },
  });
});

t.test("another client's notification is 404; one not routed yet is 409 with Retry-After", async (t) => {
  const id = await send();
  const foreign = await cancel(id, other);
  t.equal(foreign.status, 404);
  t.match(await foreign.json(), { code: "not_found" });
  t.equal((await cancel(randomUUID())).status, 404, "an unknown id");
  t.equal((await cancel("not-a-uuid")).status, 404, "an id no notification can have");

  const unrouted = await cancel(id);
  t.equal(unrouted.status, 409);
  t.equal(unrouted.headers.get("retry-after"), "1");
  t.equal(unrouted.headers.get("content-type"), "application/problem+json");
  t.match(await unrouted.json(), { code: "notification_not_routed", status: 409 });

  await route(id);
  t.equal((await cancel(id, other)).status, 404, "routed, still not the other client's");
  t.equal((await cancel(id)).status, 200, "its own client's, once routed");
});

t.test("no processor answering is a 503 with Retry-After", async (t) => {
  // A namespace no responder listens on.
  const { app: alone } = await ingestApp(t, { database, bus: await freshBus(t) });
  const id = await send();
  await route(id);
  const answer = await cancel(id, key, alone);
  t.equal(answer.status, 503);
  t.match(answer.headers.get("retry-after"), /^\d+$/);
  t.match(await answer.json(), { code: "dependency_unavailable" });
  const [row] =
    await database.sql`select status from notification_channels where notification_id = ${id} and channel = 'email'`;
  t.equal(row?.status, "pending", "nothing was canceled");
});

t.test("a cancel is the webhook event channel.canceled", async (t) => {
  const created = await app.request("/api/v1/webhook-endpoints", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ url: "https://hooks.example.com/cancel", event_types: ["channel.canceled"] }),
  });
  t.equal(created.status, 201);
  const id = await send();
  await route(id);
  t.equal((await cancel(id)).status, 200);
  const events = await database.sql<{ type: string; data: Record<string, unknown> }[]>`
    select type, data from webhook_events where notification_id = ${id} and type like 'channel.%' order by id`;
  t.match(events, [
    { type: "channel.canceled", data: { notification_id: id, channel: "email", status: "canceled" } },
    { type: "channel.canceled", data: { notification_id: id, channel: "push", status: "canceled" } },
  ]);
  t.equal(events.length, 2, "one per channel canceled, none for the suppressed one");
  const [owed] = await database.sql<{ n: number }[]>`
    select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id
    where e.notification_id = ${id}`;
  t.equal(owed?.n, 2, "each owed to the endpoint");
});
