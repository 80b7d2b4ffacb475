import { applyTopology, type Bus, connectBus, type Role, TopologyMissingError, verifyTopology } from "@notify/bus";
import { captureLogger, startNatsWithUsers } from "@notify/testing";
import t from "tap";
import { createMetrics, prepareStreams } from "../src/index.js";

// An app whose NATS user may not create streams (NATS_TOPOLOGY=verify) starts before the setup
// job: it names what is missing, waits, and goes on once the topology is there, never creating it.
const nats = await startNatsWithUsers(t);
const connect = async (role: Role): Promise<Bus> => {
  const bus = await connectBus({
    servers: nats.url,
    name: `test-${role}`,
    role,
    user: role,
    password: nats.passwords[role],
    topology: role === "setup" ? "apply" : "verify",
    namespace: "",
    partitions: 2,
  });
  t.teardown(() => bus.close());
  return bus;
};

t.test("verify names exactly what the role uses and the server lacks", async (t) => {
  const workers = await connect("workers");
  const error = await verifyTopology(workers).catch((e: unknown) => e);
  t.type(error, TopologyMissingError);
  t.same(
    (error as TopologyMissingError).missing.sort(),
    [
      "stream KV_notify_breakers",
      "stream KV_notify_rate",
      "stream KV_notify_send_guard",
      "stream KV_notify_workers",
      "stream NOTIFY_DLQ",
      "stream NOTIFY_WEBHOOKS",
      "stream NOTIFY_WORK",
    ],
    "its streams and buckets, not the lanes it never touches",
  );
});

t.test("prepareStreams waits for the setup job, then proceeds without creating anything", async (t) => {
  const processor = await connect("processor");
  const { log, lines } = captureLogger("processor");
  let done = false;
  const prepared = prepareStreams(processor, { log, metrics: createMetrics("processor"), retryMs: 100 }).then(
    (report) => {
      done = true;
      return report;
    },
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.notOk(done, "still waiting while the topology is missing");
  t.match(lines().join("\n"), /waiting for the NATS topology/, "and says so, naming what is missing");
  t.match(lines().join("\n"), /NOTIFY_LANE_TRANSACTIONAL/);

  await applyTopology(await connect("setup"));
  t.same(await prepared, [], "it goes on once the setup job has run, and reports nothing it created");
  await verifyTopology(processor);
  t.same(nats.violations(), [], "it never asked the server for what its user may not do");
});
