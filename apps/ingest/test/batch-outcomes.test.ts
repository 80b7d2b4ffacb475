import { randomUUID } from "node:crypto";
import { type Bus, PublishRejectedError, PublishTimeoutError } from "@notify/bus";
import { AppError } from "@notify/core";
import { captureLogger, eventually, freshBus, freshDatabase, inOutbox } from "@notify/testing";
import t from "tap";
import { createIngestor } from "../src/notifications/create.js";
import { recoverUnpublished } from "../src/notifications/recover.js";
import { minimalRequest } from "./support.js";

// What one batch of the group commit leaves behind when its publishes end differently: the
// outbox keeps exactly the notifications still to publish, so a retry of a request that was
// published is a replay (200) at once, and a row the sweep may already hold is never deleted.
const { database } = await freshDatabase(t);
const realBus = await freshBus(t);
const { log } = captureLogger("ingest");
const { sql } = database;

type Outcome = "ok" | "ambiguous" | "definite" | "definite-while-swept";
const outcomes = new Map<string, Outcome>();
const sweeper: { lock: Awaited<ReturnType<typeof sql.reserve>> | null } = { lock: null };
const bus: Bus = {
  ...realBus,
  async publish(subject, payload, msgId) {
    const outcome = outcomes.get((payload as { user_id: string }).user_id) ?? "ok";
    if (outcome === "ambiguous") throw new PublishTimeoutError("no JetStream ack in time");
    if (outcome === "definite-while-swept") {
      // Another process's recovery sweep holds the batch's outbox row at this moment.
      const lock = await sql.reserve();
      sweeper.lock = lock;
      await lock`begin`;
      await lock`select id from publish_outbox for update`;
    }
    if (outcome !== "ok") throw new PublishRejectedError(503, "No Responders");
    return realBus.publish(subject, payload, msgId);
  },
};
// One batch at a time: requests made while a batch is in flight form the next batch together.
const ingestor = createIngestor(
  { database, bus, log, templates: async (id) => ({ id, version: 1, params: [] }) },
  { maxConcurrentBatches: 1 },
);
t.teardown(() => ingestor.drain());

const create = (userId: string, key: string) =>
  ingestor.create({ clientId: "shop", idempotencyKey: key, request: minimalRequest(userId) });
const idOf = async (key: string) =>
  (await sql<{ id: string }[]>`select id from notifications where dedup_key = ${key}`)[0]?.id;
const codeOf = (error: unknown) => (error instanceof AppError ? error.code : String(error));

t.test("one publish acked, one unknown: only the unknown stays listed; the acked one replays", async (t) => {
  outcomes.set("u-amb", "ambiguous");
  const [keyA, keyB] = [randomUUID(), randomUUID()];
  const warm = create("u-warm", randomUUID());
  const [a, b] = await Promise.allSettled([create("u-ok", keyA), create("u-amb", keyB), warm]);
  t.equal(a.status, "fulfilled");
  t.equal(b.status === "rejected" && codeOf(b.reason), "dependency_unavailable");
  const idA = await idOf(keyA);
  const idB = await idOf(keyB);
  t.ok(idB, "the unknown one is kept: it may have landed");
  t.notOk(await inOutbox(database, idA as string), "the acked one is no longer listed");
  t.ok(await inOutbox(database, idB as string), "the unknown one is, for the sweep");

  t.same(await create("u-ok", keyA), { kind: "replayed", notificationId: idA }, "a retry of the acked one is a replay");
  await t.rejects(create("u-amb", keyB), { code: "idempotency_key_in_use" }, "the unknown one is in flight");
  outcomes.delete("u-amb");
  await recoverUnpublished({ database, bus, log }, 0);
  t.same(await create("u-amb", keyB), { kind: "replayed", notificationId: idB }, "and a replay once swept");
});

t.test("a definite failure releases its key and leaves nothing listed", async (t) => {
  outcomes.set("u-def", "definite");
  const key = randomUUID();
  await t.rejects(create("u-def", key), { code: "dependency_unavailable" });
  t.equal(await idOf(key), undefined, "the row is deleted");
  await eventually(
    async () => ((await sql`select 1 from publish_outbox`).length === 0 ? true : undefined),
    5000,
    "the batch's outbox row to be deleted",
  );
  outcomes.delete("u-def");
  t.equal((await create("u-def", key)).kind, "accepted", "the same key is accepted once NATS answers");
});

t.test("a definite failure while the sweep holds the batch keeps the row for the sweep", async (t) => {
  outcomes.set("u-swept", "definite-while-swept");
  const key = randomUUID();
  await t.rejects(create("u-swept", key), { code: "dependency_unavailable" });
  const id = await idOf(key);
  t.ok(id, "not deleted: the sweep may have published it");
  t.ok(await inOutbox(database, id as string), "still listed");
  const lock = sweeper.lock;
  t.ok(lock, "the sweep's lock was taken");
  if (lock) {
    await lock`rollback`;
    lock.release();
  }
  outcomes.delete("u-swept");
  // Earlier batches' rows are deleted by the settler within a tick; the sweep should find only this one.
  await eventually(
    async () => ((await sql`select 1 from publish_outbox`).length === 1 ? true : undefined),
    5000,
    "only this batch to be listed",
  );
  t.equal(await recoverUnpublished({ database, bus, log }, 0), 1, "the sweep publishes it");
  t.notOk(await inOutbox(database, id as string), "and settles it");
  t.same(await create("u-swept", key), { kind: "replayed", notificationId: id }, "a retry is a replay");
});
