import { applyTopology, type Bus, connectBus, loadTopologyFile } from "@notify/bus";
import { freshBus, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { streamSettingsFrom } from "../src/apply.js";
import { resolveTopology } from "../src/topology.js";

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
      report.every((r) => ["updated", "created", "kept"].includes(r.result)),
      "no failure",
    );
  }
  const again = await applyTopology(bus);
  t.same(
    [...new Set(again.map((r) => `${r.kind} ${r.result}`))].sort(),
    ["consumer updated", "kv kept", "stream kept"],
    "everything already there: streams and buckets kept as they are, consumers follow the declaration",
  );
  t.notOk(
    again.some((r) => r.drift),
    "nothing differs from the declaration",
  );
  t.equal((await bus.jsm.streams.info(stream)).state.messages, before, "stored messages survive an apply");
});

t.test("apps starting at once on an empty server each create or adopt everything, none fails", async (t) => {
  // Each app applies the topology at start; several starting together race to create the same
  // streams, buckets and consumers, and the loser of a race adopts what the winner made.
  for (let round = 0; round < 3; round++) {
    const namespace = freshNamespace(t);
    const buses = await Promise.all(
      Array.from({ length: 4 }, () =>
        connectBus({ servers: TEST_NATS_URL, name: "notify-test", namespace, partitions: 2 }),
      ),
    );
    t.teardown(() => Promise.all(buses.map((b) => b.close())));
    const reports = await Promise.all(buses.map((b) => applyTopology(b)));
    const resolved = resolveTopology(loadTopologyFile(), buses[0]!.naming);
    for (const report of reports) {
      t.equal(report.length, resolved.streams.length + resolved.kv.length + resolved.consumers.length);
    }
    for (const kv of resolved.kv) t.ok(await buses[0]!.jsm.streams.info(`KV_${kv.bucket}`), kv.bucket);
  }
});

t.test("an operator's settings on an existing stream are kept and reported; --force replaces them", async (t) => {
  const stream = bus.streams.work;
  const declared = await bus.jsm.streams.info(stream);
  t.equal(declared.config.max_age, 0, "work is never dropped for its age");
  t.equal(declared.config.discard, "new", "a full stream refuses new work instead of dropping old");
  t.equal(declared.config.num_replicas, 1, "the settings' replicas");

  // An operator raises the limit and adds an age with the nats CLI.
  await bus.jsm.streams.update(stream, { ...declared.config, max_msgs: 123_456, max_age: 3600 * 1e9 });
  const report = await applyTopology(bus);
  const row = report.find((r) => r.name === stream);
  t.equal(row?.result, "kept", "an app start keeps them");
  t.match(
    row?.drift,
    [/^max_age 3600s \(declared 0s\)$/, /^max_msgs 123456 \(declared 20000000\)$/],
    "and says how they differ",
  );
  const kept = await bus.jsm.streams.info(stream);
  t.equal(kept.config.max_msgs, 123_456, "the operator's limit stands");

  const forced = await applyTopology({ ...bus, streamSettings: { replicas: 1, force: true } });
  t.equal(forced.find((r) => r.name === stream)?.result, "forced");
  const after = await bus.jsm.streams.info(stream);
  t.equal(after.config.max_msgs, 20_000_000, "--force puts the declaration back");
  t.equal(after.config.max_age, 0);
});

t.test("a subject the service declares and the stream lacks is added, nothing else touched", async (t) => {
  const stream = bus.streams.dlq;
  const info = await bus.jsm.streams.info(stream);
  const channelSubjects = info.config.subjects.filter((s) => !s.includes("poison"));
  await bus.jsm.streams.update(stream, { ...info.config, subjects: channelSubjects, max_msgs: 99 });
  const row = (await applyTopology(bus)).find((r) => r.name === stream);
  t.equal(row?.result, "subjects added");
  const after = await bus.jsm.streams.info(stream);
  t.same(after.config.subjects, info.config.subjects, "the poison subject is back");
  t.equal(after.config.max_msgs, 99, "the operator's limit is untouched");
});

t.test("settings from the configuration apply when a stream is created", async (t) => {
  const settings = streamSettingsFrom({ NATS_REPLICAS: 1, NATS_LANE_MAX_MSGS: 42, NATS_WORK_MAX_BYTES: 1 << 20 });
  t.same(settings.limits?.NOTIFY_WORK, { max_bytes: 1 << 20 }, "an unset limit keeps the file's");
  const other = await freshBus(t, 1);
  await other.jsm.streams.delete(other.streams.lane("promotional"));
  await other.jsm.streams.delete(other.streams.work);
  await applyTopology({ ...other, streamSettings: settings });
  const lane = await other.jsm.streams.info(other.streams.lane("promotional"));
  t.equal(lane.config.max_msgs, 42);
  const work = await other.jsm.streams.info(other.streams.work);
  t.equal(work.config.max_bytes, 1 << 20);
  t.equal(work.config.max_msgs, 20_000_000, "the file's message limit");
});
