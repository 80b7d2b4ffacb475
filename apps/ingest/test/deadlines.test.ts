import { randomUUID } from "node:crypto";
import { seedApiKey } from "@notify/db";
import { settled } from "@notify/testing";
import t, { type Test } from "tap";
import { ingestApp, laneMessagesFor } from "./support.js";

// Deliver-by deadlines at ingest: the request's own, checked against the clock, or the
// template's time to live; stored with the notification and carried on its lane message.
const { app, database, bus } = await ingestApp(t, { maxBodyBytes: 65_536 });
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });

const request = (method: string, path: string, body: unknown, headers: Record<string, string>) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
const putTemplate = (id: string, ttl: number | null | undefined) =>
  request(
    "PUT",
    `/templates/${id}`,
    {
      params: ["name"],
      ...(ttl === undefined ? {} : { ttl_seconds: ttl }),
      variants: [{ channel: "sms", locale: "en", body_template: "Code for <%= it.name %>" }],
    },
    { "x-api-key": admin },
  );
const send = (body: Record<string, unknown>, key = randomUUID()) =>
  request(
    "POST",
    "/notifications",
    {
      user_id: "u1",
      category: "security",
      template_id: "otp",
      data: { name: "Ada" },
      priority: "transactional",
      ...body,
    },
    { "x-api-key": ingestKey, "idempotency-key": key },
  );
const stored = async (id: string) =>
  (
    await database.sql<{ deliver_by: Date | null; created_at: Date }[]>`
    select deliver_by, created_at from notifications where id = ${id}`
  )[0];
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);

async function expectInvalid(t: Test, response: Response, message: RegExp) {
  t.equal(response.status, 400);
  const body = (await response.json()) as { code: string; errors: Array<{ field: string; message: string }> };
  t.equal(body.code, "validation_failed");
  t.match(body.errors, [{ field: "deliver_by", message }]);
}

t.test("a template's time to live is part of its version", async (t) => {
  t.equal((await putTemplate("otp", 300)).status, 201);
  const read = await app.request("/api/v1/templates/otp", { headers: { "x-api-key": admin } });
  t.match(await read.json(), { version: 1, ttl_seconds: 300 });
  t.equal((await putTemplate("otp", 300)).status, 200, "the same content writes nothing");
  t.equal((await putTemplate("plain", undefined)).status, 201);
  for (const bad of [0, -1, 1.5, 28 * 86_400 + 1, "60"]) {
    const response = await putTemplate("bad", bad as number);
    t.equal(response.status, 400, `ttl_seconds ${JSON.stringify(bad)}`);
  }
});

t.test("a request's deliver_by is stored and carried on the lane message", async (t) => {
  const deadline = new Date(Date.now() + 600_000);
  const offset = new Date(deadline.getTime() + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
  const response = await send({ deliver_by: offset });
  t.equal(response.status, 202);
  const { notification_id } = (await response.json()) as { notification_id: string };
  t.equal((await stored(notification_id))?.deliver_by?.toISOString(), deadline.toISOString(), "the same instant");
  const messages = await laneMessagesFor(bus, notification_id);
  t.equal(messages[0]?.deliver_by, deadline.toISOString(), "the lane message carries it");
  await settled(database, notification_id);
});

t.test("without a deliver_by, the template's time to live sets one", async (t) => {
  const response = await send({});
  t.equal(response.status, 202);
  const { notification_id } = (await response.json()) as { notification_id: string };
  const row = await stored(notification_id);
  const lifetime = (row?.deliver_by?.getTime() ?? 0) - (row?.created_at.getTime() ?? 0);
  t.ok(Math.abs(lifetime - 300_000) < 5_000, `about 300 s after it was stored (${lifetime} ms)`);
  const plain = await send({ template_id: "plain" });
  const id = ((await plain.json()) as { notification_id: string }).notification_id;
  t.equal((await stored(id))?.deliver_by, null, "a template without one sets none");
  await settled(database, notification_id);
  await settled(database, id);
});

t.test("a deadline in the past, too far out or not RFC 3339 is a 400, and nothing is stored", async (t) => {
  const before = await rows();
  await expectInvalid(t, await send({ deliver_by: new Date(Date.now() - 1000).toISOString() }), /in the future/);
  await expectInvalid(
    t,
    await send({ deliver_by: new Date(Date.now() + 29 * 86_400_000).toISOString() }),
    /at most 28 days/,
  );
  for (const text of ["2030-01-01", "2030-01-01T10:00:00", "soon", "2030-02-30T00:00:00Z"]) {
    await expectInvalid(t, await send({ deliver_by: text }), /RFC 3339/);
  }
  const notAString = await send({ deliver_by: 1_800_000_000 });
  t.equal(notAString.status, 400);
  t.equal(await rows(), before, "nothing stored");
});

/** The lane messages of one notification, read off its stream. */

t.test("a retry after the deadline replays the accepted request; a new one is a 400", async (t) => {
  const key = randomUUID();
  const body = { deliver_by: new Date(Date.now() + 1000).toISOString() };
  const first = await send(body, key);
  t.equal(first.status, 202);
  const { notification_id } = (await first.json()) as { notification_id: string };
  await settled(database, notification_id);
  await new Promise((resolve) => setTimeout(resolve, 1200));
  const retry = await send(body, key);
  t.equal(retry.status, 200, "the same key and body: the first answer");
  t.equal(retry.headers.get("idempotent-replayed"), "true");
  t.match(await retry.json(), { notification_id });
  const before = await rows();
  await expectInvalid(t, await send(body), /in the future/);
  t.equal(await rows(), before, "a new key with that deadline stores nothing");
});
