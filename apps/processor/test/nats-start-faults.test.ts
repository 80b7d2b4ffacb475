import { connect, createServer, type Socket } from "node:net";
import { applyTopology, connectBus } from "@notify/bus";
import { freshDatabase, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { startProcessor } from "../src/start.js";

// A processor started while NATS misbehaves (in the chaos run, one started right after a
// nats-server restart) waits and runs: no NATS error ends its process. It reaches NATS through
// a proxy that, once it sees the client send `pattern`, holds what the client sends for a while
// (JetStream then answers nothing: every request times out) or drops the connection.
t.setTimeout(120_000);

interface Fault {
  pattern: string;
  action: { hold: number } | "drop";
}

async function faultyNats() {
  const target = new URL(TEST_NATS_URL);
  let fault: Fault | undefined;
  let fired = false;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect({ host: target.hostname, port: Number(target.port || 4222) });
    sockets.add(client).add(upstream);
    let held: Buffer[] | undefined;
    let tail = "";
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    client.on("data", (chunk: Buffer) => {
      // The last bytes of the previous chunk too: a command may straddle two.
      const seen = tail + chunk.toString("latin1");
      tail = seen.slice(-128);
      if (fault && seen.includes(fault.pattern)) {
        const { action } = fault;
        fault = undefined;
        fired = true;
        if (action === "drop") return drop();
        const hold: Buffer[] = [];
        held = hold;
        setTimeout(() => {
          held = undefined;
          for (const part of hold) upstream.write(part);
        }, action.hold);
      }
      if (held) held.push(chunk);
      else upstream.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `nats://127.0.0.1:${port}`,
    arm(next: Fault) {
      fault = next;
      fired = false;
    },
    fired: () => fired,
  };
}

const { url: databaseUrl } = await freshDatabase(t);
const namespace = freshNamespace(t);
{
  const setup = await connectBus({ servers: TEST_NATS_URL, name: "notify-test-setup", namespace, partitions: 1 });
  await applyTopology(setup);
  await setup.close();
}
const nats = await faultyNats();
const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl,
  NATS_URL: nats.url,
  NATS_NAMESPACE: namespace,
  LANE_PARTITIONS: "1",
  PORT: "0",
  LOG_LEVEL: "error",
  ...extra,
});
// Longer than a JetStream request's timeout (5 s): each request sent meanwhile times out.
const HOLD_MS = 6500;

t.test("JetStream silent when the connection is made: the start waits for it", async (t) => {
  nats.arm({ pattern: "$JS.API.INFO", action: { hold: HOLD_MS } });
  const started = Date.now();
  const processor = await startProcessor(env(), { telemetry: false });
  t.teardown(() => processor.stop());
  t.ok(nats.fired(), "JetStream's first request was held");
  t.ok(Date.now() - started >= HOLD_MS, "the start waited it out instead of failing with a timeout");
});

t.test("JetStream silent while the topology is checked: the start waits for it", async (t) => {
  // Checked only (verify): a timed-out stream info is not covered by an attempt to create it.
  nats.arm({ pattern: "$JS.API.STREAM.INFO.", action: { hold: HOLD_MS } });
  const started = Date.now();
  const processor = await startProcessor(env({ NATS_TOPOLOGY: "verify" }), { telemetry: false });
  t.teardown(() => processor.stop());
  t.ok(nats.fired(), "the topology check was held");
  t.ok(Date.now() - started >= HOLD_MS, "the start waited it out instead of failing with a timeout");
});

t.test("the connection dropped as the dead-letter responder subscribes: nothing is left unhandled", async (t) => {
  const unhandled: unknown[] = [];
  const record = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", record);
  t.teardown(() => {
    process.off("unhandledRejection", record);
  });
  nats.arm({ pattern: `SUB ${namespace}.notify.ops.dlq.list`, action: "drop" });
  const processor = await startProcessor(env(), { telemetry: false });
  t.teardown(() => processor.stop());
  await new Promise((resolve) => setTimeout(resolve, 2000));
  t.ok(nats.fired(), "the connection was dropped at the subscription");
  t.same(unhandled, [], "no rejection without a handler (one would end the process)");
});
