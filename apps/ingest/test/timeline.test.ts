import { randomUUID } from "node:crypto";
import { moveStatus, recordRoutedChannels, seedApiKey, seedTemplate } from "@notify/db";
import { settled } from "@notify/testing";
import t from "tap";
import { ingestApp } from "./support.js";

// GET /api/v1/notifications/{id} shows each channel's history: every provider call with its
// provider and outcome, every status taken, and each switch of provider between attempts.
const { app, database } = await ingestApp(t, { maxBodyBytes: 65_536 });
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const key = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read"] });
const other = await seedApiKey(database, { clientId: "blog", name: "blog", scopes: ["ingest", "read"] });
const get = (id: string, apiKey = key) =>
  app.request(`/api/v1/notifications/${id}`, { headers: { "x-api-key": apiKey } });

t.test("attempts, statuses and provider switches, oldest first, only to the owner", async (t) => {
  const deadline = new Date(Date.now() + 600_000).toISOString();
  const posted = await app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "u1",
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
      deliver_by: deadline,
    }),
  });
  const { notification_id: id } = (await posted.json()) as { notification_id: string };
  await settled(database, id);
  const ref = { notification_id: id, channel: "email" as const };
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  // As the workers write them: SendGrid refuses twice, SMTP takes it.
  const attempt = (n: number, provider: string, outcome: string, error: string | null, providerId: string | null) => ({
    attempt: n,
    provider,
    outcome,
    providerId,
    error,
  });
  await moveStatus(database.sql, ref, "retrying", {
    reason: "sendgrid 503",
    attempts: 1,
    attempt: attempt(1, "sendgrid", "transient", "sendgrid 503", null),
  });
  await moveStatus(database.sql, ref, "retrying", {
    reason: "sendgrid 503",
    attempts: 2,
    attempt: attempt(2, "sendgrid", "transient", "sendgrid 503", null),
  });
  await moveStatus(database.sql, ref, "delivered", {
    provider: "smtp",
    providerId: "m-1",
    attempts: 3,
    attempt: attempt(3, "smtp", "accepted", null, "m-1"),
  });

  const response = await get(id);
  t.equal(response.status, 200);
  const body = (await response.json()) as {
    deliver_by: string;
    status: string;
    channels: { email: { status: string; provider: string; provider_id: string } };
    timeline: Array<Record<string, unknown>>;
  };
  t.equal(body.deliver_by, deadline);
  t.equal(body.status, "completed");
  t.match(body.channels.email, { status: "delivered", provider: "smtp", provider_id: "m-1" }, "names the provider");
  t.match(
    body.timeline.map((e) => [e.event, e.attempt ?? e.to ?? null, e.provider ?? e.status ?? null]),
    [
      ["accepted", null, null],
      ["attempt", 1, "sendgrid"],
      ["status", 1, "retrying"],
      ["attempt", 2, "sendgrid"],
      ["status", 2, "retrying"],
      ["provider_switch", "smtp", null],
      ["attempt", 3, "smtp"],
      ["status", 3, "delivered"],
    ],
  );
  t.match(body.timeline[5], { event: "provider_switch", channel: "email", from: "sendgrid", to: "smtp" });
  t.match(body.timeline[1], { outcome: "transient", error: "sendgrid 503", channel: "email" });
  const times = body.timeline.map((e) => Date.parse(e.at as string));
  t.same(
    times,
    [...times].sort((a, b) => a - b),
    "oldest first",
  );
  t.equal((await get(id, other)).status, 404, "another client sees nothing of it");
});

t.test("each channel's routing decision stays in the timeline with its reason after its status moves on", async (t) => {
  const post = async (user: string) => {
    const posted = await app.request("/api/v1/notifications", {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": randomUUID() },
      body: JSON.stringify({
        user_id: user,
        category: "account",
        template_id: "welcome",
        data: { name: "Ada" },
        priority: "promotional",
      }),
    });
    const { notification_id: id } = (await posted.json()) as { notification_id: string };
    await settled(database, id);
    return id;
  };
  const user = `u-${randomUUID().slice(0, 8)}`;
  const id = await post(user);
  const later = new Date(Date.now() + 3_600_000);
  // As the processor records them: email to be sent, SMS opted out, push deferred by quiet hours.
  await recordRoutedChannels(database, {
    notificationId: id,
    clientId: "shop",
    userId: user,
    priority: "promotional",
    channels: [
      { channel: "email", status: "pending", reason: null, nextAttemptAt: null },
      { channel: "sms", status: "suppressed", reason: "opted_out", nextAttemptAt: null },
      { channel: "push", status: "deferred", reason: "quiet_hours", nextAttemptAt: later },
    ],
    deferredUntil: later,
    cap: null,
  });
  await moveStatus(database.sql, { notification_id: id, channel: "email" }, "delivered", {
    provider: "sendgrid",
    providerId: "m-2",
    attempts: 1,
    attempt: { attempt: 1, provider: "sendgrid", outcome: "accepted", providerId: "m-2", error: null },
  });
  const body = (await (await get(id)).json()) as { timeline: Array<Record<string, unknown>> };
  const routed = body.timeline.filter((e) => e.event === "routed");
  t.same(
    routed.map((e) => [e.channel, e.status, e.reason]).sort(),
    [
      ["email", "pending", null],
      ["push", "deferred", "quiet_hours"],
      ["sms", "suppressed", "opted_out"],
    ],
    "the decision as made: email's stays pending though it was delivered since",
  );
  t.same(
    body.timeline.map((e) => e.event),
    ["accepted", "routed", "routed", "routed", "attempt", "status"],
    "routed after accepted, before the first attempt",
  );

  // The daily cap is decided in the same transaction: the decision recorded is the cap's.
  const capped = await post(user);
  const cap = { userId: user, day: new Date().toISOString().slice(0, 10), cap: 0 };
  const outcome = await recordRoutedChannels(database, {
    notificationId: capped,
    clientId: "shop",
    userId: user,
    priority: "promotional",
    channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
    deferredUntil: null,
    cap,
  });
  t.equal(outcome.capped, true, "over the cap");
  const cappedBody = (await (await get(capped)).json()) as { timeline: Array<Record<string, unknown>> };
  t.match(
    cappedBody.timeline.find((e) => e.event === "routed"),
    {
      channel: "email",
      status: "suppressed",
      reason: "rate_cap",
    },
  );
});

t.test("a notification not routed yet has only its acceptance in its timeline", async (t) => {
  const posted = await app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "u2",
      category: "account",
      template_id: "welcome",
      data: { name: "Bo" },
      priority: "transactional",
    }),
  });
  const { notification_id: id } = (await posted.json()) as { notification_id: string };
  await settled(database, id);
  const body = (await (await get(id)).json()) as { created_at: string; timeline: unknown[] };
  t.match(body, { status: "accepted", deliver_by: null, channels: {}, trace_id: null });
  t.same(body.timeline, [{ event: "accepted", at: body.created_at }]);
});
