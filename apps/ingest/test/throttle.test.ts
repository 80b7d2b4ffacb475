import { randomUUID } from "node:crypto";
import type { LaneMessage } from "@notify/core";
import { seedApiKey } from "@notify/db";
import { settled } from "@notify/testing";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// A request's throttle at ingest: validated field by field (a 400 naming the field, nothing
// stored), stored with the notification and carried on its lane message.
const { app, database, bus } = await ingestApp(t, { maxBodyBytes: 65_536 });
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });

const request = (method: string, path: string, body: unknown, headers: Record<string, string>) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const send = (body: Record<string, unknown>) =>
  request(
    "POST",
    "/notifications",
    {
      user_id: "u1",
      category: "comments",
      template_id: "comment",
      data: { name: "Ada" },
      priority: "promotional",
      ...body,
    },
    { "x-api-key": ingestKey, "idempotency-key": randomUUID() },
  );
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);

async function expectInvalid(t: Test, response: Response, field: string, message: RegExp) {
  t.equal(response.status, 400);
  t.match(response.headers.get("content-type"), /application\/problem\+json/);
  const body = (await response.json()) as { code: string; errors: Array<{ field: string; message: string }> };
  t.equal(body.code, "validation_failed");
  t.match(body.errors, [{ field, message }]);
}

t.before(async () => {
  const template = await request(
    "PUT",
    "/templates/comment",
    {
      params: ["name"],
      variants: [{ channel: "sms", locale: "en", body_template: "From <%= it.name %>" }],
    },
    { "x-api-key": admin },
  );
  if (template.status !== 201) throw new Error(`template: ${template.status} ${await template.text()}`);
});

t.test("a bad throttle is a 400 naming the field, and nothing is stored", async (t) => {
  const before = await rows();
  const throttle = { key: "comments", limit: 3, per: "1h" };
  await expectInvalid(t, await send({ throttle: { ...throttle, limit: 0 } }), "throttle.limit", /at least 1/);
  await expectInvalid(t, await send({ throttle: { ...throttle, limit: 2.5 } }), "throttle.limit", /integer/);
  await expectInvalid(t, await send({ throttle: { ...throttle, per: "2x" } }), "throttle.per", /duration/);
  await expectInvalid(t, await send({ throttle: { ...throttle, per: "31d" } }), "throttle.per", /to 30d/);
  await expectInvalid(t, await send({ throttle: { ...throttle, key: "has space" } }), "throttle.key", /printable/);
  await expectInvalid(
    t,
    await send({ throttle: { ...throttle, over_limit: "drop" } }),
    "throttle.over_limit",
    /"suppress" or "digest"/,
  );
  await expectInvalid(
    t,
    await send({ throttle: { ...throttle, over_limit: "digest" } }),
    "throttle.over_limit",
    /needs the request's digest/,
  );
  await expectInvalid(t, await send({ throttle: { ...throttle, burst: 5 } }), "throttle.burst", /unknown field/);
  await expectInvalid(t, await send({ throttle: "1/h" }), "throttle", /must be an object/);
  t.equal(await rows(), before, "nothing stored");
});

t.test("a valid throttle is stored and carried on the lane message", async (t) => {
  const throttle = { key: "comments", limit: 3, per: "1h" };
  const response = await send({ throttle });
  t.equal(response.status, 202, await response.clone().text());
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  const [row] = await database.sql<{ throttle: unknown }[]>`select throttle from notifications where id = ${id}`;
  t.same(row?.throttle, throttle);
  const stream = bus.streams.lane("promotional");
  const info = await bus.jsm.streams.info(stream);
  const found: LaneMessage[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const message = await bus.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    const value = message?.json<LaneMessage>();
    if (value?.notification_id === id) found.push(value);
  }
  t.same(
    found.map((m) => m.throttle),
    [throttle],
  );
  await settled(database, id);
});
