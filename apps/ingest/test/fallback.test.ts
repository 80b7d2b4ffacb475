import { randomUUID } from "node:crypto";
import { seedApiKey, seedTemplate } from "@notify/db";
import { settled } from "@notify/testing";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// A notification's channel fallback chain at ingest: checked, stored with the notification in
// the same statement, and shown in its timeline once steps are taken.
const { app, database } = await ingestApp(t, { maxBodyBytes: 65_536 });
await seedTemplate(database, {
  id: "otp",
  params: ["code"],
  variants: [
    { channel: "push", locale: "en", subject: "Code", body: "<%= it.code %>" },
    { channel: "sms", locale: "en", subject: null, body: "<%= it.code %>" },
  ],
});
const key = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read"] });
const send = (body: Record<string, unknown>) =>
  app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "u1",
      category: "security",
      template_id: "otp",
      data: { code: "123456" },
      priority: "transactional",
      channels: ["push"],
      ...body,
    }),
  });
const chains = async () => Number((await database.sql`select count(*)::int as n from notification_fallbacks`)[0]?.n);
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);

async function expectInvalid(t: Test, response: Response, field: string) {
  t.equal(response.status, 400);
  const body = (await response.json()) as { code: string; errors: Array<{ field: string }> };
  t.equal(body.code, "validation_failed");
  t.ok(
    body.errors.some((e) => e.field === field),
    `names ${field}: ${JSON.stringify(body.errors)}`,
  );
}

t.test("a chain is stored with the notification, and its steps show in the timeline", async (t) => {
  const fallback = [{ channel: "sms", when: ["failed", "unconfirmed"], confirm_within_seconds: 30 }];
  const response = await send({ fallback });
  t.equal(response.status, 202);
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  await settled(database, id);
  const [chain] =
    await database.sql`select steps, next_step, watching from notification_fallbacks where notification_id = ${id}`;
  t.same(chain, { steps: fallback, next_step: 0, watching: "push" });

  // As the processor records a step it took.
  const at = new Date().toISOString();
  await database.sql`update notification_fallbacks
    set taken = ${database.sql.json([{ at, from: "push", to: "sms", because: "failed" }] as never)} where notification_id = ${id}`;
  const view = (await (await app.request(`/api/v1/notifications/${id}`, { headers: { "x-api-key": key } })).json()) as {
    timeline: Array<{ event: string }>;
  };
  t.match(view.timeline[0], { event: "accepted" }, "accepted first");
  t.same(
    view.timeline.filter((e) => e.event !== "accepted"),
    [{ event: "fallback", at, channel: "sms", from: "push", because: "failed" }],
  );
});

t.test("a chain that cannot be followed is a 400, and nothing is stored", async (t) => {
  const before = { rows: await rows(), chains: await chains() };
  await expectInvalid(
    t,
    await send({ channels: undefined, fallback: [{ channel: "sms", when: ["failed"] }] }),
    "channels",
  );
  await expectInvalid(
    t,
    await send({ channels: ["push", "sms"], fallback: [{ channel: "email", when: ["failed"] }] }),
    "channels",
  );
  await expectInvalid(t, await send({ fallback: [{ channel: "push", when: ["failed"] }] }), "fallback.0.channel");
  await expectInvalid(
    t,
    await send({ fallback: [{ channel: "sms", when: ["unconfirmed"] }] }),
    "fallback.0.confirm_within_seconds",
  );
  await expectInvalid(t, await send({ fallback: [{ channel: "sms", when: [] }] }), "fallback.0.when");
  await expectInvalid(t, await send({ fallback: [{ channel: "sms", when: ["late"] }] }), "fallback.0.when.0");
  await expectInvalid(t, await send({ fallback: [] }), "fallback");
  await expectInvalid(t, await send({ fallback: [{ channel: "fax", when: ["failed"] }] }), "fallback.0.channel");
  t.same({ rows: await rows(), chains: await chains() }, before);
});

t.test("without a fallback, no chain is written", async (t) => {
  const before = await chains();
  const response = await send({});
  t.equal(response.status, 202);
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  await settled(database, id);
  t.equal(await chains(), before);
});

t.test("while a step may still add a channel the notification is processing, then its outcome", async (t) => {
  const response = await send({ fallback: [{ channel: "sms", when: ["failed"] }] });
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  await settled(database, id);
  const status = async () =>
    (
      (await (await app.request(`/api/v1/notifications/${id}`, { headers: { "x-api-key": key } })).json()) as {
        status: string;
      }
    ).status;
  const listed = async () =>
    (
      (await (
        await app.request("/api/v1/users/u1/notifications?limit=100", { headers: { "x-api-key": key } })
      ).json()) as {
        data: Array<{ notification_id: string; status: string }>;
      }
    ).data.find((n) => n.notification_id === id)?.status;
  // As the workers leave it: the push failed, and the processor has not decided the step yet.
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'push', 'failed')`;
  t.equal(await status(), "processing", "not failed: an SMS may still go");
  t.equal(await listed(), "processing", "the list says the same");
  await database.sql`update notification_fallbacks set done_at = now() where notification_id = ${id}`;
  t.equal(await status(), "failed", "once the chain has ended");
});
