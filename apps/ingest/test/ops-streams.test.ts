import { randomUUID } from "node:crypto";
import { AckPolicy } from "@nats-io/jetstream";
import { type ConsumerState, connectBus, type StreamState } from "@notify/bus";
import { partitionOf } from "@notify/core";
import { seedApiKey, seedTemplate } from "@notify/db";
import { freshBus, freshNamespace, settled, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { ingestApp } from "./support.js";

// GET /api/v1/ops/streams: this deployment's streams and consumers as the server has them now.
const { app, database, bus } = await ingestApp(t);
// Another deployment on the same server: its streams are not this one's.
const other = await freshBus(t);
await seedTemplate(database, {
  id: "welcome",
  params: [],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hello" }],
});
const shop = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read"] });
const operator = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });

type Consumer = ConsumerState;
type Stream = StreamState;
const streams = async (key = operator, target = app) => {
  const response = await target.request("/api/v1/ops/streams", { headers: { "x-api-key": key } });
  return { status: response.status, headers: response.headers, body: (await response.json()) as { data: Stream[] } };
};

t.test("a consumer's pending count after publishing; this namespace's streams only, by name", async (t) => {
  const user = "alice";
  const sent = 3;
  for (let i = 0; i < sent; i++) {
    const response = await app.request("/api/v1/notifications", {
      method: "POST",
      headers: { "x-api-key": shop, "content-type": "application/json", "idempotency-key": randomUUID() },
      body: JSON.stringify({
        user_id: user,
        category: "account",
        template_id: "welcome",
        data: {},
        priority: "transactional",
      }),
    });
    const { notification_id } = (await response.json()) as { notification_id: string };
    await settled(database, notification_id);
  }
  const { status, body } = await streams();
  t.equal(status, 200);
  const names = body.data.map((s) => s.name);
  t.same(names, [...names].sort(), "sorted by name");
  t.same(
    names,
    [
      bus.streams.dlq,
      bus.streams.lane("promotional"),
      bus.streams.lane("transactional"),
      bus.streams.work,
      bus.streams.webhooks,
    ].sort(),
    "the deployment's five streams",
  );
  t.notOk(
    names.some((n) => n.startsWith(other.naming.namespace.toUpperCase())),
    "nothing of another namespace",
  );
  const lane = body.data.find((s) => s.name === bus.streams.lane("transactional")) as Stream;
  t.match(lane, { messages: sent, first_seq: 1, last_seq: sent });
  t.ok(lane.bytes > 0);
  t.same(lane.subjects, [bus.subjects.lane("transactional", 0).replace(/\.0$/, ".*")]);
  const partition = partitionOf(user, bus.naming.partitions);
  const consumer = lane.consumers.find((c) => c.name === `processor-transactional-p${partition}`) as Consumer;
  t.match(consumer, {
    filter_subject: bus.subjects.lane("transactional", partition),
    num_pending: sent,
    num_ack_pending: 0,
    num_redelivered: 0,
  });
  t.equal(
    lane.consumers.filter((c) => c.name !== consumer.name).reduce((sum, c) => sum + c.num_pending, 0),
    0,
    "the other partition's consumer has nothing",
  );
  t.same(
    lane.consumers.map((c) => c.name),
    lane.consumers.map((c) => c.name).sort(),
    "consumers sorted by name",
  );

  // Taken in hand and not acknowledged: pending moves to ack pending.
  const messages = await (await bus.js.consumers.get(lane.name, consumer.name)).fetch({
    max_messages: 2,
    expires: 2000,
  });
  for await (const _ of messages) if (messages.getProcessed() >= 2) break;
  const after = (await streams()).body.data
    .find((s) => s.name === lane.name)
    ?.consumers.find((c) => c.name === consumer.name);
  t.match(after, { num_pending: sent - 2, num_ack_pending: 2 });

  // A reader's ephemeral consumer (the dead-letter list, `nats stream view`) is counted, not listed.
  const dlq = bus.streams.dlq;
  const durables = (await streams()).body.data.find((s) => s.name === dlq) as Stream;
  const reader = await bus.jsm.consumers.add(dlq, { ack_policy: AckPolicy.None, inactive_threshold: 30_000_000_000 });
  t.teardown(() => bus.jsm.consumers.delete(dlq, reader.name).catch(() => {}));
  const withReader = (await streams()).body.data.find((s) => s.name === dlq) as Stream;
  t.equal(withReader.ephemeral_consumers, 1, "the reader is counted");
  t.same(
    withReader.consumers.map((c) => c.name),
    durables.consumers.map((c) => c.name),
    "and not listed among the service's consumers",
  );
});

t.test("the operator scope only", async (t) => {
  const answer = await streams(shop);
  t.equal(answer.status, 403);
  t.match(answer.body, { code: "insufficient_scope" });
});

t.test("NATS unreachable: 503 with Retry-After", async (t) => {
  const closed = await connectBus({
    servers: TEST_NATS_URL,
    name: "closed",
    namespace: freshNamespace(t),
    partitions: 2,
  });
  await closed.close();
  const { app: cut } = await ingestApp(t, { database, bus: closed });
  const answer = await streams(operator, cut);
  t.equal(answer.status, 503);
  t.match(answer.body, { code: "dependency_unavailable" });
  t.match(answer.headers.get("retry-after"), /^\d+$/);
});
