import { randomUUID } from "node:crypto";
import { type Bus, PublishRejectedError, PublishTimeoutError } from "@notify/bus";
import type { LaneMessage } from "@notify/core";
import { seedApiKey, seedTemplate } from "@notify/db";
import { captureLogger, eventually, freshBus, freshDatabase, inOutbox, settled, streamCount } from "@notify/testing";
import t from "tap";
import { startMaintenance } from "../src/notifications/maintenance.js";
import { ingestApp } from "./support.js";

// Invariant 1: a notification committed but not published (the publish fails after the
// commit) is found and published by the recovery path; a definite failure leaves nothing.
const { database } = await freshDatabase(t);
const realBus = await freshBus(t);
const { log } = captureLogger("ingest");
let failNext: "ambiguous" | "definite" | null = null;
const bus: Bus = {
  ...realBus,
  async publish(subject, payload, msgId) {
    const mode = failNext;
    failNext = null;
    if (mode === "ambiguous") throw new PublishTimeoutError("no JetStream ack in time");
    if (mode === "definite") throw new PublishRejectedError(503, "No Responders");
    return realBus.publish(subject, payload, msgId);
  },
};
const { app } = await ingestApp(t, { bus, database, log });
await seedTemplate(database, {
  id: "welcome",
  params: [],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hi" }],
});
const key = await seedApiKey(database, { clientId: "shop", name: "k", scopes: ["ingest"] });
const post = (idempotencyKey: string) =>
  app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify({
      user_id: "u1",
      category: "orders",
      template_id: "welcome",
      data: {},
      priority: "transactional",
    }),
  });
const lane = () => streamCount(realBus, realBus.streams.lane("transactional"));

t.test("publish fails after the commit: 503, then the recovery sweep publishes the row", async (t) => {
  const idempotencyKey = randomUUID();
  const before = await lane();
  failNext = "ambiguous";
  const refused = await post(idempotencyKey);
  t.equal(refused.status, 503, "nothing is reported as accepted");
  const [row] = await database.sql`select id from notifications where dedup_key = ${idempotencyKey}`;
  t.ok(row, "the committed row is kept: the publish may have landed");
  t.ok(await inOutbox(database, row?.id), "and stays in the outbox for the sweep");
  t.equal(await lane(), before, "nothing on the lane yet");

  const retry = await post(idempotencyKey);
  t.equal(retry.status, 409, "a retry while it is unsettled is told to come back");

  const maintenance = startMaintenance({ database, bus: realBus, log }, { intervalMs: 100, graceMs: 0 });
  t.teardown(() => maintenance.stop());
  await eventually(async () => ((await lane()) === before + 1 ? true : undefined), 10_000, "the sweep to publish");
  const message = await realBus.jsm.streams.getMessage(realBus.streams.lane("transactional"), {
    last_by_subj: realBus.subjects.lane(
      "transactional",
      Number((await database.sql`select partition from notifications where id = ${row?.id}`)[0]?.partition),
    ),
  });
  t.equal(message?.json<LaneMessage>().notification_id, row?.id, "the lane carries the recovered notification");
  await settled(database, row?.id);
  const replay = await post(idempotencyKey);
  t.equal(replay.status, 200, "the retry now gets the existing notification");
  t.same(await replay.json(), { notification_id: row?.id, status: "accepted" });
  t.equal(await lane(), before + 1, "and nothing more is enqueued");
});

t.test("a definite publish failure leaves nothing behind and releases the key", async (t) => {
  const idempotencyKey = randomUUID();
  failNext = "definite";
  t.equal((await post(idempotencyKey)).status, 503);
  t.same(await database.sql`select id from notifications where dedup_key = ${idempotencyKey}`, []);
  t.same(await database.sql`select key from idempotency_keys where key = ${idempotencyKey}`, []);
  t.equal((await post(idempotencyKey)).status, 202, "the same request is accepted once NATS answers");
});

t.test("two identical requests racing: exactly one notification, the other 409 or 200 with the same id", async (t) => {
  for (let round = 0; round < 20; round++) {
    const idempotencyKey = randomUUID();
    const answers = await Promise.all([post(idempotencyKey), post(idempotencyKey)]);
    const statuses = answers.map((a) => a.status).sort((a, b) => a - b);
    const bodies = (await Promise.all(answers.map((a) => a.json()))) as Array<{ notification_id?: string }>;
    const rows = await database.sql`select id from notifications where dedup_key = ${idempotencyKey}`;
    t.equal(rows.length, 1, `round ${round}: one row`);
    t.ok(["200,202", "202,409"].includes(statuses.join(",")), `round ${round}: ${statuses.join(",")}`);
    for (const body of bodies) if (body.notification_id) t.equal(body.notification_id, rows[0]?.id);
  }
});
