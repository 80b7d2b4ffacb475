import { applyTopology, type Bus, loadTopologyFile, resolveTopology } from "@notify/bus";
import { freshBus } from "@notify/testing";
import t from "tap";

// applyTopology against the real NATS, in a namespace of this file's own.
const bus: Bus = await freshBus(t, 2);

t.test("every declared stream, consumer and bucket exists after an apply, under the namespace", async (t) => {
  const resolved = resolveTopology(loadTopologyFile(), bus.naming);
  t.ok(resolved.streams.length > 0 && resolved.consumers.length > 0 && resolved.kv.length > 0);
  for (const stream of resolved.streams) {
    const info = await bus.jsm.streams.info(stream.name);
    t.same(info.config.subjects, stream.subjects, stream.name);
    t.ok(stream.name.startsWith(bus.naming.namespace.toUpperCase()), `${stream.name} is namespaced`);
  }
  for (const consumer of resolved.consumers) {
    const info = await bus.jsm.consumers.info(consumer.stream, consumer.durable);
    t.equal(info.config.filter_subject, consumer.filter_subject, `${consumer.stream}/${consumer.durable}`);
  }
  // Templated consumers are expanded once per partition: two partitions, two lane consumers each.
  t.equal(resolved.consumers.filter((c) => c.durable.startsWith("processor-transactional-p")).length, 2);
  for (const kv of resolved.kv) t.ok(await bus.jsm.streams.info(`KV_${kv.bucket}`), kv.bucket);
});

t.test("applying again changes nothing and reports updates, from several callers at once", async (t) => {
  const stream = bus.streams.work;
  await bus.publish(bus.subjects.work("email", "transactional"), { id: "kept" }, "kept");
  const before = (await bus.jsm.streams.info(stream)).state.messages;
  const reports = await Promise.all([applyTopology(bus), applyTopology(bus)]);
  for (const report of reports) {
    t.ok(
      report.filter((r) => r.kind !== "kv").every((r) => r.result === "updated" || r.result === "created"),
      "no failure",
    );
  }
  const again = await applyTopology(bus);
  t.ok(
    again.filter((r) => r.kind !== "kv").every((r) => r.result === "updated"),
    "everything already there",
  );
  t.equal((await bus.jsm.streams.info(stream)).state.messages, before, "stored messages survive an apply");
});
