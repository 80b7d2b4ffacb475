import { StorageType } from "@nats-io/jetstream";
import { applyTopology, type BucketEvent, BucketMissingError, bucketName, connectBus } from "@notify/bus";
import { eventually, freshBus, TEST_NATS_URL } from "@notify/testing";
import t from "tap";

// A nats-server restart loses the memory buckets (notify_rate, notify_breakers, notify_workers)
// while the file streams stay, so no consumer notices: the KV views put the topology back
// themselves. Against the real NATS, the buckets' streams deleted under a running bus.
const bus = await freshBus(t, 1);
const events: BucketEvent[] = [];
bus.onBucketEvent((event) => events.push(event));
const stream = (bucket: "notify_rate" | "notify_breakers") => `KV_${bucketName(bus.naming, bucket)}`;
const exists = (name: string) =>
  bus.jsm.streams.info(name).then(
    (info) => info,
    () => null,
  );

t.test("a bucket deleted under a running bus is put back by its next operation (apply)", async (t) => {
  const rate = await bus.kv("notify_rate");
  const breakers = await bus.kv("notify_breakers");
  await rate.put("sendgrid", "before");
  await breakers.put("sendgrid", "before");
  events.length = 0;

  await bus.jsm.streams.delete(stream("notify_rate"));
  await bus.jsm.streams.delete(stream("notify_breakers"));

  t.equal(await rate.get("sendgrid"), null, "a read answers: the bucket is there again, empty");
  const info = await exists(stream("notify_rate"));
  t.ok(info, "notify_rate's stream exists again");
  t.equal(info?.config.storage, StorageType.Memory, "as declared: in memory");
  t.ok(await exists(stream("notify_breakers")), "and notify_breakers', put back by the same apply");
  t.ok((await breakers.put("sendgrid", "after")) > 0, "a write to the other bucket answers");
  t.equal((await breakers.get("sendgrid"))?.string(), "after");
  t.same(
    events.map((e) => e.state),
    ["restored"],
    "said once, for the apply that put both back, not per operation",
  );

  // A write finds the stream gone (nothing captures its subject), and a compare-and-set too.
  await bus.jsm.streams.delete(stream("notify_rate"));
  t.ok((await rate.put("a", "1")) > 0, "a put is stored in the bucket put back");
  await bus.jsm.streams.delete(stream("notify_rate"));
  t.ok((await rate.create("b", "1")) > 0, "a create too");
  const before = (await rate.get("b"))?.revision ?? 0;
  await bus.jsm.streams.delete(stream("notify_rate"));
  const refused = await rate.update("b", "2", before).catch((error: unknown) => error);
  t.match(refused, { message: /wrong last sequence/ }, "an update of a revision gone with the bucket loses its race");
  t.ok(await exists(stream("notify_rate")), "but the bucket is there again");
});

t.test("operations that meet the loss together wait for one apply", async (t) => {
  const rate = await bus.kv("notify_rate");
  events.length = 0;
  await bus.jsm.streams.delete(stream("notify_rate"));
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => rate.put(`k${i}`, "v")));
  t.equal(answers.length, 20, "every one answered");
  t.same(
    events.map((e) => e.state),
    ["restored"],
    "one apply, said once",
  );
});

t.test("a process that may not create it waits for the setup job, degraded, without spinning", async (t) => {
  const verifying = await connectBus({
    servers: TEST_NATS_URL,
    name: "notify-test-verify",
    namespace: bus.naming.namespace,
    partitions: bus.naming.partitions,
    topology: "verify",
  });
  t.teardown(() => verifying.close());
  const seen: BucketEvent[] = [];
  verifying.onBucketEvent((event) => seen.push(event));
  const rate = await verifying.kv("notify_rate");
  await rate.put("x", "1");
  await bus.jsm.streams.delete(stream("notify_rate"));

  const first = await rate.get("x").catch((error: unknown) => error);
  t.type(first, BucketMissingError, "the operation fails, saying the bucket is missing");
  t.match(first, { bucket: bucketName(bus.naming, "notify_rate"), cause: { name: "TopologyMissingError" } });
  const started = Date.now();
  const repeats = await Promise.all(Array.from({ length: 50 }, () => rate.get("x").catch((error: unknown) => error)));
  t.ok(
    repeats.every((e) => e instanceof BucketMissingError),
    "later operations fail the same way until the next attempt",
  );
  t.ok(Date.now() - started < 500, "at once: the server is not asked each time");
  t.same(
    seen.map((e) => e.state),
    ["missing"],
    "said once",
  );
  t.notOk(await exists(stream("notify_rate")), "nothing created by a process that may not");

  await applyTopology(bus);
  await eventually(
    async () =>
      await rate
        .get("x")
        .then(() => true)
        .catch(() => undefined),
    10_000,
    "the bucket back",
  );
  t.same(
    seen.map((e) => e.state),
    ["missing", "restored"],
    "and it says when the bucket answers again",
  );
});
